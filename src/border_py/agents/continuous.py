"""Networks and sampling of continuous control (SAC, :mod:`border_py.agents.sac`): the
tanh-squashed Gaussian policy and its log-probability, the critics evaluated as one ensemble, and
the exploration noise correlated over steps.

The log-probability of a squashed action ``a = tanh(u)``, ``u ~ N(mean, std)``, is the Gaussian's
corrected by the change of variables (Haarnoja et al. 2018, appendix C):

    log pi(a|s) = sum_i [ log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2) ]

It is that of ``a`` in ``[-1, 1]^A``, as in the reference implementation and SB3: the affine map
to an env's bounds would only add the constant ``-sum_i log(scale_i)``, and leaving it out makes
SAC's ``target_entropy = -|A|`` mean the same for every env.

With ``noise_correlation`` rho > 0 the ``eps`` of an exploring actor's samples ``u = mean + std *
eps`` is, per env, an AR(1) process (a discrete Ornstein-Uhlenbeck process) instead of white
noise,

    eps_t = rho * eps_{t-1} + sqrt(1 - rho^2) * xi_t,    xi_t ~ N(0, 1),

still N(0, 1) at every step (the policy's own action distribution) but correlated over about
``1 / (1 - rho)`` steps, so that pushes persist: what a sparse-reward task with momentum
(MountainCarContinuous) needs to be solved by chance at all (temporally correlated exploration,
as with gSDE or colored noise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from border_py.agents.networks import VectorInput, mlp

__all__ = ["GaussianPolicy", "QEnsemble", "correlated_noise", "squashed_log_prob"]

LOG_2 = math.log(2.0)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def squashed_log_prob(u: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``log pi(tanh(u))`` for ``u ~ N(mean, exp(log_std))``, summed over action dims: shape (B,).

    ``log(1 - tanh(u)^2)`` is computed as ``2 * (log 2 - u - softplus(-2u))``, exact and finite
    even where ``tanh(u)`` rounds to 1.
    """
    gaussian = -0.5 * ((u - mean) / log_std.exp()) ** 2 - log_std - LOG_SQRT_2PI
    log_det = 2.0 * (LOG_2 - u - F.softplus(-2.0 * u))
    return (gaussian - log_det).sum(dim=-1)


def correlated_noise(previous: np.ndarray, rho: float, xi: np.ndarray) -> np.ndarray:
    """The next step of the AR(1) exploration noise: ``rho * previous + sqrt(1 - rho^2) * xi``
    (N(0, 1) marginals when ``previous`` and ``xi`` are)."""
    return (rho * previous + math.sqrt(1.0 - rho * rho) * xi).astype(np.float32)


class GaussianPolicy(nn.Module):
    """A diagonal Gaussian over pre-squash actions ``u``: ``obs -> (mean, log_std)``, each (B, A).

    One MLP outputs both halves; ``log_std`` is clamped to ``[LOG_STD_MIN, LOG_STD_MAX]`` (the
    bounds of the SAC reference implementations), which keeps ``std`` away from 0 and infinity.
    Observations are flattened and multiplied by ``scale`` first (:class:`VectorInput`).
    """

    LOG_STD_MIN = -20.0
    LOG_STD_MAX = 2.0

    def __init__(
        self, obs_dim: int, hidden_sizes: Sequence[int], act_dim: int, scale: float = 1.0
    ) -> None:
        super().__init__()
        self.body = mlp(obs_dim, hidden_sizes, 2 * act_dim, scale)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.body(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(self.LOG_STD_MIN, self.LOG_STD_MAX)


class QEnsemble(nn.Module):
    """``n`` independent Q-networks ``Q_i(s, a)``, ReLU MLPs over ``[s, a]``, evaluated together.

    Layer ``k`` of all ``n`` networks is one batched matrix product (weights of shape
    ``(n, in, out)``), so ``n`` critics cost the kernel launches of one. Each network is
    initialized like ``nn.Linear`` (weights and biases uniform in ``+-1/sqrt(in)``). Observations
    are flattened and multiplied by ``scale`` first (:class:`VectorInput`).
    """

    def __init__(
        self, obs_dim: int, act_dim: int, hidden_sizes: Sequence[int], n: int, scale: float = 1.0
    ) -> None:
        super().__init__()
        self.obs_input = VectorInput(scale)
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
        x = torch.cat([self.obs_input(obs), action], dim=1)
        h = x.expand(len(self.weights[0]), *x.shape)
        last = len(self.weights) - 1
        for k, (weight, bias) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = torch.baddbmm(bias, h, weight)
            if k < last:
                h = torch.relu(h)
        return h.squeeze(-1)
