"""Network building blocks shared by agents."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from border_py.config import ConfigError


def mlp(in_dim: int, hidden_sizes: Sequence[int], out_dim: int) -> nn.Sequential:
    """A ReLU multi-layer perceptron ``in_dim -> hidden... -> out_dim`` (no output activation)."""
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden_sizes:
        layers += [nn.Linear(last, width), nn.ReLU()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(nn.Flatten(), *layers)


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


class GaussianPolicy(nn.Module):
    """A diagonal Gaussian over pre-squash actions ``u``: ``obs -> (mean, log_std)``, each (B, A).

    One MLP outputs both halves; ``log_std`` is clamped to ``[LOG_STD_MIN, LOG_STD_MAX]`` (the
    bounds of the SAC reference implementations), which keeps ``std`` away from 0 and infinity.
    """

    LOG_STD_MIN = -20.0
    LOG_STD_MAX = 2.0

    def __init__(self, obs_dim: int, hidden_sizes: Sequence[int], act_dim: int) -> None:
        super().__init__()
        self.body = mlp(obs_dim, hidden_sizes, 2 * act_dim)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.body(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)


class QEnsemble(nn.Module):
    """``n`` independent Q-networks ``Q_i(s, a)``, ReLU MLPs over ``[s, a]``, evaluated together.

    Layer ``k`` of all ``n`` networks is one batched matrix product (weights of shape
    ``(n, in, out)``), so ``n`` critics cost the kernel launches of one. Each network is
    initialized like ``nn.Linear`` (weights and biases uniform in ``+-1/sqrt(in)``).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int], n: int) -> None:
        super().__init__()
        sizes = [obs_dim + act_dim, *(int(h) for h in hidden_sizes), 1]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for k in range(len(sizes) - 1):
            fan_in, fan_out = sizes[k], sizes[k + 1]
            bound = 1.0 / math.sqrt(fan_in)
            self.weights.append(
                nn.Parameter(torch.empty(n, fan_in, fan_out).uniform_(-bound, bound))
            )
            self.biases.append(nn.Parameter(torch.empty(n, 1, fan_out).uniform_(-bound, bound)))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Q-values of every network, shape (n, B)."""
        x = torch.cat([obs.flatten(1), action], dim=1)
        h = x.expand(len(self.weights[0]), *x.shape)
        last = len(self.weights) - 1
        for k, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(bias, h, weight)
            if k < last:
                h = torch.relu(h)
        return h.squeeze(-1)
