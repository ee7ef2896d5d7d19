"""Network building blocks shared by agents."""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from border_py.config import require
from border_py.errors import ConfigError

__all__ = [
    "DuelingHead",
    "MinAtarCNN",
    "NatureCNN",
    "QuantileNetwork",
    "VectorInput",
    "cpu_weights",
    "flat_dim",
    "input_scale",
    "mlp",
    "polyak_update",
    "q_network",
    "resolve_device",
]


class VectorInput(nn.Module):
    """The input of an MLP: observations flattened to (B, features), as float32 times ``scale``.

    Observations travel in their compact dtype; uint8 ones (pixels, or vectors such as the Atari
    RAM of ``ALE/Pong-ram-v5``) are scaled into [0, 1] here, as :class:`NatureCNN` does for images.

    Args:
        scale: input scaling (see :func:`input_scale`).
    """

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1).float()
        return x if self.scale == 1.0 else x * self.scale


def input_scale(space: gym.Space) -> float:
    """How a network scales observations of ``space``: uint8 ones into [0, 1] (1/255, or 1 over a
    Box's upper bound when it is lower: MinAtar's 0/1 grids are taken as they are), else 1."""
    if space.dtype != np.uint8:
        return 1.0
    if isinstance(space, gym.spaces.Box) and 0 < int(np.max(space.high)) < 255:
        return 1 / int(np.max(space.high))
    return 1 / 255


def mlp(
    in_dim: int, hidden_sizes: Sequence[int], out_dim: int, scale: float = 1.0
) -> nn.Sequential:
    """A ReLU multi-layer perceptron ``in_dim -> hidden... -> out_dim`` (no output activation) over
    flattened inputs multiplied by ``scale`` (:class:`VectorInput`)."""
    return nn.Sequential(VectorInput(scale), *dense(in_dim, hidden_sizes, out_dim))


def cpu_weights(module: nn.Module) -> dict[str, torch.Tensor]:
    """A CPU copy of ``module``'s state dict (what the learner publishes to actors).

    On a GPU the tensors of each dtype are gathered on the device and copied to page-locked host
    memory asynchronously, then waited for once: one wait per publication, not a blocking copy
    (a device sync) per tensor. Each tensor is then cloned out of those buffers on the host (a
    dict of views would keep them alive and pickle the whole buffer once per tensor).
    """
    state = {k: v.detach() for k, v in module.state_dict().items()}
    devices = {v.device for v in state.values()}
    if len(devices) != 1 or next(iter(devices)).type != "cuda":
        return {k: v.cpu().clone() for k, v in state.items()}
    by_dtype: dict[torch.dtype, list[str]] = {}
    for key, value in state.items():
        by_dtype.setdefault(value.dtype, []).append(key)
    copies = []
    for dtype, keys in by_dtype.items():
        flat = torch.cat([state[k].reshape(-1) for k in keys])
        host = torch.empty(flat.shape, dtype=dtype, pin_memory=True)
        copies.append((keys, host.copy_(flat, non_blocking=True)))
    torch.cuda.current_stream(next(iter(devices))).synchronize()
    out: dict[str, torch.Tensor] = {}
    for keys, host in copies:
        pieces = host.split([state[k].numel() for k in keys])
        out |= {k: p.view(state[k].shape).clone() for k, p in zip(keys, pieces, strict=True)}
    return {k: out[k] for k in state}


def flat_dim(shape: Sequence[int]) -> int:
    """Number of scalars in an observation of ``shape``."""
    return int(math.prod(shape))


def polyak_update(online: nn.Module, target: nn.Module, tau: float) -> None:
    """target <- tau * online + (1 - tau) * target, in place."""
    with torch.no_grad():
        for p_t, p in zip(target.parameters(), online.parameters(), strict=True):
            p_t.lerp_(p, tau)


def resolve_device(device: str) -> torch.device:
    """``torch.device(device)``, refusing CUDA when it is not available."""
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"device={device!r}: must be cpu, cuda or cuda:<index>") from None
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError(f"device={device!r}: must be cpu, cuda or cuda:<index>")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(
            f"device={device!r}: this machine has {torch.cuda.device_count()} CUDA devices"
        )
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r}: CUDA is not available on this machine (use cpu)")
    return dev


# -- value networks for discrete actions: torsos, dueling and quantile heads (DQN, IQN) ----------


class NatureCNN(nn.Module):
    """The convolutional torso of Mnih et al. (2015): 32x8x8 stride 4, 64x4x4 stride 2, 64x3x3
    stride 1, ReLU after each, flattened.

    Input ``(B, C, H, W)``, converted to float and multiplied by ``scale`` here, so that actors
    and the replay buffer keep pixels as compact uint8.

    Args:
        in_channels: stacked frames (C).
        scale: input scaling (1/255 for uint8 pixels).
    """

    def __init__(self, in_channels: int, scale: float = 1 / 255) -> None:
        super().__init__()
        self.scale = scale
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, 32, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.float() * self.scale)


class MinAtarCNN(nn.Module):
    """The convolutional torso of the MinAtar DQN (Young & Tian 2019): 16 3x3 filters, stride 1,
    ReLU, flattened (16 x (H-2) x (W-2) features: 1024 on MinAtar's 10x10 grids).

    The Nature CNN's 8x8 stride-4 kernels need frames of at least 36x36; this one fits any frame
    of at least 3x3. Input ``(B, C, H, W)``, converted to float and multiplied by ``scale`` here.

    Args:
        in_channels: channels of the grid (C: MinAtar's object kinds).
        scale: input scaling (1 for 0/1 grids, see :func:`input_scale`).
    """

    def __init__(self, in_channels: int, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, 16, kernel_size=3, stride=1), nn.ReLU(), nn.Flatten()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.float() * self.scale)


NATURE_MIN_SIZE = 36  # the smallest frame side the Nature CNN's kernels fit
TORSOS = ("auto", "mlp", "cnn", "minatar")


def is_image_space(space: gym.Space) -> bool:
    """Whether ``space`` holds stacked images: a uint8 Box of shape (C, H, W)."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def torso(observation_space: gym.Space, network: str) -> tuple[nn.Module, int]:
    """The observation encoder of a value network and its output width.

    Args:
        observation_space: the env's observation space.
        network: ``cnn`` (:class:`NatureCNN`, channels first), ``minatar`` (:class:`MinAtarCNN`,
            channels first), ``mlp`` (:class:`VectorInput`: flatten) or ``auto``: for uint8
            (C, H, W) images ``cnn`` from 36x36 up and ``minatar`` below, else ``mlp``. All scale
            uint8 observations into [0, 1] (:func:`input_scale`).
    """
    require("network", network in TORSOS, ", ".join(repr(t) for t in TORSOS), network)
    shape = tuple(observation_space.shape or ())
    requested = network
    if network == "auto" and is_image_space(observation_space):
        network = "cnn" if min(shape[1:]) >= NATURE_MIN_SIZE else "minatar"
    elif network == "auto":
        network = "mlp"
    scale = input_scale(observation_space)
    if network == "mlp":
        return VectorInput(scale), flat_dim(shape)
    require("network", len(shape) == 3, f"{network!r} only for (C, H, W) observations", network)
    cnn = NatureCNN(shape[0], scale) if network == "cnn" else MinAtarCNN(shape[0], scale)
    features = conv_features(cnn.conv, shape)
    if features == 0:  # the kernels do not fit
        smallest = NATURE_MIN_SIZE if network == "cnn" else 3
        raise ConfigError(
            f"network={requested!r}: observations of shape {shape} are too small for the"
            f" {network!r} torso (frames of at least {smallest}x{smallest}); use network=mlp"
        )
    return cnn, features


def conv_features(layers: nn.Sequential, shape: tuple[int, ...]) -> int:
    """Features of one ``(C, H, W)`` input after ``layers``' convolutions, flattened (0 where a
    kernel does not fit). Computed from the layers' settings, not by running them: on the meta
    device (the memory estimate's) a run imports ``torch._dynamo``, a second of start-up."""
    channels, height, width = shape
    for layer in layers:
        if isinstance(layer, nn.Conv2d):
            pads = tuple(int(p) for p in layer.padding)  # ints here, never "same"/"valid"
            height, width = (
                (size + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
                for size, kernel, stride, pad, dilation in zip(
                    (height, width),
                    layer.kernel_size,
                    layer.stride,
                    pads,
                    layer.dilation,
                    strict=True,
                )
            )
            channels = layer.out_channels
            if height < 1 or width < 1:
                return 0
    return channels * height * width


def dense(in_dim: int, hidden_sizes: Sequence[int], out_dim: int | None) -> list[nn.Module]:
    """Linear+ReLU layers of ``hidden_sizes``, then a linear output of ``out_dim`` (None: none)."""
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden_sizes:
        layers += [nn.Linear(last, int(width)), nn.ReLU()]
        last = int(width)
    if out_dim is not None:
        layers.append(nn.Linear(last, out_dim))
    return layers


class DuelingHead(nn.Module):
    """Value and advantage streams aggregated as ``Q = V + A - mean_a A`` (Wang et al. 2016, eq. 9).

    Args:
        in_dim: width of the shared features.
        hidden_sizes: hidden widths of each stream.
        n_actions: number of actions.
    """

    def __init__(self, in_dim: int, hidden_sizes: Sequence[int], n_actions: int) -> None:
        super().__init__()
        self.value = nn.Sequential(*dense(in_dim, hidden_sizes, 1))
        self.advantage = nn.Sequential(*dense(in_dim, hidden_sizes, n_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, advantage = self.value(x), self.advantage(x)
        return value + advantage - advantage.mean(dim=-1, keepdim=True)


def q_network(
    observation_space: gym.Space,
    n_actions: int,
    hidden_sizes: Sequence[int],
    network: str = "auto",
    dueling: bool = False,
) -> nn.Sequential:
    """A Q-network: the torso, ``hidden_sizes`` fully connected layers, one output per action.

    Without dueling and with an ``mlp`` torso the layout (and state-dict keys) is that of
    :func:`mlp`. With ``dueling`` the last hidden layer is split into a value and an advantage
    stream (Wang et al.: the conv torso shared, one 512-unit layer per stream).
    """
    encoder, dim = torso(observation_space, network)
    if not dueling:
        return nn.Sequential(encoder, *dense(dim, hidden_sizes, n_actions))
    shared, streams = list(hidden_sizes[:-1]), list(hidden_sizes[-1:])
    last = int(shared[-1]) if shared else dim
    return nn.Sequential(encoder, *dense(dim, shared, None), DuelingHead(last, streams, n_actions))


class QuantileNetwork(nn.Module):
    """An implicit quantile network (Dabney et al. 2018): ``Z_tau(x, a) = f(psi(x) * phi(tau))_a``.

    ``psi`` is the torso (with, for vector observations, all but the last hidden layer), ``phi``
    the cosine embedding of eq. 4, ``phi_j(tau) = ReLU(sum_{i=0}^{n-1} cos(pi i tau) w_ij + b_j)``,
    and ``f`` the last hidden layer and the output layer.

    Args:
        observation_space: the env's observation space.
        n_actions: number of actions.
        hidden_sizes: fully connected widths after the torso (at least one).
        network: torso choice, see :func:`torso`.
        n_cos: cosines of the embedding (n).
    """

    i_pi: torch.Tensor

    def __init__(
        self,
        observation_space: gym.Space,
        n_actions: int,
        hidden_sizes: Sequence[int],
        network: str = "auto",
        n_cos: int = 64,
    ) -> None:
        super().__init__()
        require("hidden_sizes", len(hidden_sizes) >= 1, "at least one width", hidden_sizes)
        encoder, dim = torso(observation_space, network)
        shared = list(hidden_sizes[:-1])
        self.psi = nn.Sequential(encoder, *dense(dim, shared, None))
        width = int(shared[-1]) if shared else dim
        i_pi = np.arange(n_cos, dtype=np.float32) * np.float32(math.pi)  # no torch op: see torso
        self.register_buffer("i_pi", torch.tensor(i_pi), persistent=False)
        self.phi = nn.Sequential(nn.Linear(n_cos, width), nn.ReLU())
        self.f = nn.Sequential(*dense(width, hidden_sizes[-1:], n_actions))

    def embed(self, taus: torch.Tensor) -> torch.Tensor:
        """phi(tau) for ``taus`` of shape (B, N): shape (B, N, width)."""
        return self.phi(torch.cos(taus.unsqueeze(-1) * self.i_pi))

    def forward(self, obs: torch.Tensor, taus: torch.Tensor) -> torch.Tensor:
        """Quantile values of shape (B, N, n_actions) at ``taus`` (B, N)."""
        features = self.psi(obs)  # (B, width)
        return self.f(features.unsqueeze(1) * self.embed(taus))
