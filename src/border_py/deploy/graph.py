"""The greedy policy of border's agents as one torch module: observations in, ``(action,
values)`` out, for a batch of any size (what every export format runs).

- DQN: ``values`` are the Q-values ``Q(s, .)``, ``action = argmax_a Q(s, a)``;
- IQN: ``values`` are the mean quantile values over the agent's ``k`` midpoint levels
  ``(j + 0.5) / k`` (the agent's own greedy ``act``: fixed levels, so the action is a function of
  the observation alone), ``action`` their arg max;
- SAC: ``values`` are the Gaussian policy's mean (before the tanh squash), ``action`` the squashed
  mean mapped onto the action bounds, ``clip(center + scale * tanh(mean), low, high)``, shaped
  as the action space (the agent's ``act`` without exploration).

Observations go in as the env gives them (the space's dtype; uint8 ones are scaled inside the
network, as in training: :func:`~border_py.agents.networks.input_scale`). :class:`CheckedInput`
refuses others in the TorchScript export, by the numpy export's rule: a float frame would be
scaled a second time.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from border_py.agents.base import Agent
from border_py.agents.continuous import GaussianPolicy
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN, midpoints
from border_py.agents.networks import QuantileNetwork
from border_py.agents.sac import SAC
from border_py.errors import ConfigError

__all__ = [
    "CheckedInput",
    "GreedyGaussian",
    "GreedyQ",
    "GreedyQuantile",
    "ObsCheck",
    "greedy_module",
    "sample_observations",
]

EXPORTABLE = (DQN, IQN, SAC)


class GreedyQ(nn.Module):
    """``obs -> (argmax_a Q(s, a), Q(s, .))`` of a Q-network (DQN)."""

    def __init__(self, q: nn.Module) -> None:
        super().__init__()
        self.q = q

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = self.q(obs)
        return q.argmax(dim=1), q


class GreedyQuantile(nn.Module):
    """``obs -> (argmax_a Q(s, a), Q(s, .))`` of an implicit quantile network (IQN), ``Q`` the
    mean of the quantile values at the fixed levels ``taus``.

    The embedding of the levels is computed once for the batch and broadcast over it (the same
    products as :meth:`QuantileNetwork.forward` with the levels repeated per row), so the graph
    holds no batch size.
    """

    taus: torch.Tensor

    def __init__(self, z: QuantileNetwork, taus: torch.Tensor) -> None:
        super().__init__()
        self.z = z
        self.register_buffer("taus", taus.reshape(1, -1))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.z.psi(obs)  # (B, width)
        quantiles = self.z.f(features.unsqueeze(1) * self.z.embed(self.taus))  # (B, K, A)
        q = quantiles.mean(dim=1)
        return q.argmax(dim=1), q


class GreedyGaussian(nn.Module):
    """``obs -> (action, mean)`` of SAC's Gaussian policy: the squashed mean on the bounds."""

    low: torch.Tensor
    high: torch.Tensor
    center: torch.Tensor
    scale: torch.Tensor

    def __init__(self, policy: GaussianPolicy, action_space: gym.spaces.Box) -> None:
        super().__init__()
        self.policy = policy
        low = torch.as_tensor(action_space.low, dtype=torch.float32).reshape(-1)
        high = torch.as_tensor(action_space.high, dtype=torch.float32).reshape(-1)
        self.register_buffer("low", low)
        self.register_buffer("high", high)
        self.register_buffer("center", (high + low) / 2)
        self.register_buffer("scale", (high - low) / 2)
        self.shape = tuple(int(n) for n in action_space.shape)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, _ = self.policy(obs)
        action = self.center + self.scale * torch.tanh(mean)
        action = torch.minimum(torch.maximum(action, self.low), self.high)
        return action.reshape(-1, *self.shape), mean


class ObsCheck(nn.Module):
    """Observations checked by the rule of every export
    (:func:`~border_py.deploy.numpy_policy.as_batch`), for TorchScript (``torch.jit.script``): a
    batch ``(B, *shape)`` of integers that the space's dtype holds (an integer space: a uint8
    frame goes in unscaled), of real numbers (a float space: integers or floats) or of bools (a
    bool space), returned in the space's dtype; else a ``ValueError`` naming what is expected
    (TorchScript raises it inside its ``torch.jit.Error``).
    """

    def __init__(self, space: gym.Space) -> None:
        super().__init__()
        self.shape = [int(n) for n in space.shape or ()]
        dtype = np.dtype(space.dtype)
        self.kind = {"b": "bool", "i": "integer", "u": "integer"}.get(dtype.kind, "float")
        self.dtype = torch.from_numpy(np.zeros(0, dtype)).dtype
        unscaled = " (unscaled: the model scales them)" if dtype == np.uint8 else ""
        self.expected = (
            f"expected a batch (B, *{tuple(self.shape)}) of {dtype.name}{unscaled}, as the env"
            " gives them"
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.dtype == torch.bool:
            kind = "bool"
        elif obs.is_floating_point():
            kind = "float"
        elif obs.is_complex():
            kind = "complex"
        else:
            kind = "integer"
        fits = kind == self.kind or (self.kind == "float" and kind == "integer")
        fits = fits and obs.dim() == len(self.shape) + 1 and obs.shape[1:] == self.shape
        if fits and self.kind == "integer" and obs.dtype != self.dtype:  # values it holds
            fits = torch.equal(obs.to(self.dtype).to(obs.dtype), obs)
        if not fits:
            raise ValueError(f"observations of shape {obs.shape} ({kind}): {self.expected}")
        return obs.to(self.dtype)


class CheckedInput(nn.Module):
    """``module`` behind an :class:`ObsCheck` of its input, for TorchScript."""

    def __init__(self, module: nn.Module, space: gym.Space) -> None:
        super().__init__()
        self.module = module
        self.check = ObsCheck(space)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.module(self.check(obs))


def greedy_module(agent: Agent, action_space: gym.Space) -> nn.Module:
    """A CPU copy of ``agent``'s greedy policy as one module in eval mode (see the module doc).

    Raises:
        ConfigError: an agent other than border's DQN, IQN and SAC (one line).
    """
    if not isinstance(agent, EXPORTABLE):
        raise ConfigError(
            f"agent {type(agent).__module__}.{type(agent).__name__}: exports take border's DQN,"
            " IQN and SAC agents only (a network of your own: export it with torch.onnx yourself)"
        )
    module: nn.Module
    if isinstance(agent, DQN):
        module = GreedyQ(agent.q)
    elif isinstance(agent, IQN):
        module = GreedyQuantile(agent.z, midpoints(agent.args.k, agent.device))
    else:
        assert isinstance(action_space, gym.spaces.Box)  # SAC accepts Box actions only
        module = GreedyGaussian(agent.policy, action_space)
    return _copy_to_cpu(module)


def _copy_to_cpu(module: nn.Module) -> nn.Module:
    """A frozen CPU copy of ``module`` (the agent's own networks are left as they are)."""
    return copy.deepcopy(module).cpu().eval().requires_grad_(False)


def sample_observations(space: gym.Space, n: int, seed: int = 0) -> np.ndarray:
    """``n`` observations sampled from a seeded copy of ``space`` (its own generator is left
    as it is), as one batch of its dtype."""
    copied = copy.deepcopy(space)
    copied.seed(seed)
    return np.stack([copied.sample() for _ in range(n)]).astype(space.dtype)
