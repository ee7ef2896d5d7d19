"""Implicit Quantile Networks (Dabney et al. 2018) for discrete actions, epsilon-greedy.

The network maps a state and quantile levels ``tau`` to the quantile values ``Z_tau(s, a)`` of
the return. On a batch of n-step transitions ``(s, a, R, s', d)`` (``d`` already holds
``gamma**k``, 0 after a terminal state), with ``tau_i``, ``tau'_j`` and ``tau~_k`` drawn from
U[0, 1]:

    a*        = argmax_a (1/K) sum_k Z_{tau~_k}(s', a)          (online net if double_dqn, else target)
    delta_ij  = R + d * Z^target_{tau'_j}(s', a*) - Z_{tau_i}(s, a)
    rho_tau(u) = |tau - 1{u < 0}| * L_kappa(u) / kappa          (L_kappa: Huber loss, threshold kappa)
    loss(s)   = sum_{i=1..N} (1/N') sum_{j=1..N'} rho_{tau_i}(delta_ij)     (eq. 3)

and the batch loss is the mean of ``loss(s)`` (weighted by importance weights under prioritized
replay). Exploring actions are ``argmax_a (1/K) sum_k Z_{tau~_k}(s, a)`` with sampled levels, as
in the paper; greedy actions (evaluation) use the K midpoint levels ``(k + 0.5) / K`` instead, the
same expectation estimated without noise, so an evaluation is a function of the weights alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.batch import TensorBatch, obs_tensor
from border_py.agents.checkpointed import RandomState
from border_py.agents.discrete import DiscreteValueAgent, value_parts
from border_py.agents.footprint import Footprint, iqn_footprint
from border_py.agents.hparams import HParams, configured_by
from border_py.agents.networks import QuantileNetwork
from border_py.config import widths
from border_py.transitions import Transitions

__all__ = ["IQN", "IQNArgs", "midpoints", "quantile_huber_loss"]


def quantile_huber_loss(delta: torch.Tensor, taus: torch.Tensor, kappa: float) -> torch.Tensor:
    """Per-sample quantile Huber loss ``sum_i mean_j rho_{tau_i}(delta_ij)``.

    Args:
        delta: TD errors ``target_j - Z_{tau_i}``, shape (B, N, N').
        taus: the online quantile levels ``tau_i``, shape (B, N).
        kappa: the Huber threshold (> 0).

    Returns:
        Shape (B,).
    """
    abs_delta = delta.abs()
    huber = torch.where(abs_delta <= kappa, 0.5 * delta**2, kappa * (abs_delta - 0.5 * kappa))
    weight = (taus.unsqueeze(-1) - (delta.detach() < 0).float()).abs()
    return (weight * huber / kappa).mean(dim=2).sum(dim=1)


def midpoints(n: int, device: torch.device) -> torch.Tensor:
    """The quantile levels ``(k + 0.5) / n``, k = 0..n-1, shape (n,)."""
    return (torch.arange(n, dtype=torch.float32, device=device) + 0.5) / n


@dataclass(frozen=True)
class IQNArgs(HParams):
    """IQN's hyper-parameters (the keys of ``conf/agent/iqn.yaml``)."""

    rules = {"hidden_sizes": partial(widths, at_least=1)}  # the last one follows the embedding

    hidden_sizes: Sequence[int] = (128, 128)
    """Fully connected widths after the torso (at least one; the paper's Atari network has one of
    512)."""
    network: str = "auto"
    """``auto`` (for uint8 (C, H, W) observations the Nature CNN from 36x36 and the MinAtar CNN
    below, else an MLP), ``mlp``, ``cnn`` or ``minatar``."""
    n_cos: int = 64
    """Cosines of the quantile embedding (the paper's n = 64)."""
    n_tau: int = 32
    """Online quantile levels per sample in the loss (N)."""
    n_tau_prime: int = 32
    """Target quantile levels per sample in the loss (N')."""
    k: int = 32
    """Quantile levels averaged to act and to pick the target action (K)."""
    kappa: float = 1.0
    """Huber threshold of the quantile loss."""
    lr: float = 1e-3
    """Adam learning rate."""
    adam_eps: float = 1e-8
    """Adam's epsilon (Dopamine's IQN on Atari: 3.125e-4 with lr 5e-5, the paper's settings; 1.5e-4
    with lr 6.25e-5 when matched to Rainbow)."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """Rewards summed per transition (returns are computed by the actors)."""
    batch_size: int = 64
    """Transitions per optimization step."""
    double_dqn: bool = False
    """Pick the target action with the online network (else the target network)."""
    max_grad_norm: float | None = 10.0
    """Gradient-norm clipping threshold (None: no clipping)."""
    target_update_interval: int = 100
    """Opt steps between hard target copies."""
    eps_start: float = 1.0
    """Initial exploration epsilon."""
    eps_final: float = 0.05
    """Final exploration epsilon."""
    eps_decay_steps: int = 10000
    """Env steps over which epsilon decays linearly."""


class IQN(DiscreteValueAgent[IQNArgs]):
    """IQN agent: a quantile network with the cosine embedding, the quantile Huber loss, hard
    target copies and epsilon-greedy exploration.

    The quantile network's torso is the Nature CNN for uint8 (C, H, W) images (MinAtar's CNN
    under 36x36) and an MLP for vector observations (uint8 ones, such as Atari RAM, scaled into
    [0, 1]); the embedding multiplies
    the torso's output (for vector observations: the output of all hidden layers but the last)
    and the last hidden layer and the output layer follow (see
    :class:`~border_py.agents.networks.QuantileNetwork`).

    Args:
        observation_space: the env's (Box) observation space.
        action_space: the env's Discrete action space.
        device: where the learner's networks live (``cpu`` or ``cuda``).
        seed: seeds network initialization, quantile sampling and exploration.
        **hparams: the fields of :class:`IQNArgs`.
    """

    acting_module = "z"  # actors act with the online quantile network
    checkpointed = {
        **value_parts("z"),
        "tau_rng": RandomState("tau_rng"),  # quantile levels
    }

    @configured_by(IQNArgs)
    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        **hparams: Any,
    ) -> None:
        super().__init__(IQNArgs, observation_space, action_space, device, seed, hparams)
        args = self.args

        def z_net() -> QuantileNetwork:
            return QuantileNetwork(
                observation_space, self.n_actions, args.hidden_sizes, args.network, args.n_cos
            )

        self.z, self.z_target, self.optimizers = self.value_network("z", seed, z_net)
        self.tau_rng = torch.Generator(device=self.device)
        self.tau_rng.manual_seed(seed)

    @classmethod
    def footprint(
        cls, observation_space: gym.Space, action_space: gym.Space, **hparams: Any
    ) -> Footprint:
        """What the agent of ``hparams`` takes on these spaces, without building it (see
        :func:`~border_py.agents.footprint.iqn_footprint`)."""
        args = IQNArgs(**hparams)
        n_actions = int(action_space.n)  # type: ignore[attr-defined]  # check_spaces: Discrete
        levels = (args.n_tau, args.n_tau_prime, args.k)
        return iqn_footprint(
            observation_space,
            n_actions,
            args.hidden_sizes,
            args.network,
            args.n_cos,
            levels,
            args.batch_size,
        )

    def _sample_taus(self, batch: int, n: int) -> torch.Tensor:
        """Quantile levels drawn from U[0, 1), shape (batch, n)."""
        return torch.rand(batch, n, generator=self.tau_rng, device=self.device)

    def q_values(self, obs: torch.Tensor, taus: torch.Tensor, net: QuantileNetwork) -> torch.Tensor:
        """``(1/K) sum_k Z_{tau_k}(obs, a)`` for ``taus`` of shape (B, K): shape (B, n_actions)."""
        return net(obs, taus).mean(dim=1)

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Epsilon-greedy actions over K sampled levels (``explore``), else greedy over K midpoints."""
        with torch.no_grad():
            x = obs_tensor(obs, self.device)
            if explore:
                taus = self._sample_taus(len(x), self.args.k)
            else:
                taus = midpoints(self.args.k, self.device).expand(len(x), self.args.k)
            actions = self.q_values(x, taus, self.z).argmax(dim=1).cpu().numpy()
        return self.explore(actions) if explore else actions

    def _per_sample_loss(
        self,
        b: TensorBatch,
        taus: torch.Tensor,
        taus_prime: torch.Tensor,
        taus_k: torch.Tensor,
        target_net: QuantileNetwork,
        chooser: QuantileNetwork,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-sample quantile Huber loss (B,), online quantiles of the taken actions (B, N))."""
        size = len(b.action)
        with torch.no_grad():
            best = self.q_values(b.next_obs, taus_k, chooser).argmax(dim=1)  # a*, (B,)
            next_z = target_net(b.next_obs, taus_prime)  # (B, N', A)
            next_z = next_z.gather(2, best.view(size, 1, 1).expand(size, next_z.shape[1], 1))
            target = b.reward.unsqueeze(1) + b.discount.unsqueeze(1) * next_z.squeeze(2)  # (B, N')
        z = self.z(b.obs, taus)  # (B, N, A)
        z = z.gather(2, b.action.view(size, 1, 1).expand(size, z.shape[1], 1)).squeeze(2)
        delta = target.unsqueeze(1) - z.unsqueeze(2)  # delta_ij, (B, N, N')
        return quantile_huber_loss(delta, taus, self.args.kappa), z

    def update(self, batch: Transitions) -> dict[str, Any]:
        """One gradient step on the quantile Huber loss, then the target copy when due.

        Returns ``train/loss``, ``train/q_mean`` and ``td_error``: the per-sample loss (the
        quantile Huber loss summed over the online quantiles), the magnitude a prioritized
        buffer ranks samples by.
        """
        metrics = self.update_tensors(TensorBatch.of(batch, self.device, discrete=True))
        metrics["td_error"] = metrics["td_error"].cpu().numpy().astype(np.float32)
        return metrics

    def update_tensors(self, b: TensorBatch) -> dict[str, Any]:
        """:meth:`update` on a batch already on the device; ``td_error`` stays a device tensor."""
        size = len(b.action)
        taus_k = self._sample_taus(size, self.args.k)  # tau~_k: pick a*
        taus_prime = self._sample_taus(size, self.args.n_tau_prime)  # tau'_j: target quantiles
        taus = self._sample_taus(size, self.args.n_tau)  # tau_i: online quantiles
        chooser = self.z if self.args.double_dqn else self.z_target
        per_sample, z = self._per_sample_loss(b, taus, taus_prime, taus_k, self.z_target, chooser)
        loss = b.weighted_mean(per_sample)  # eq. 3 averaged over the batch, weights applied once

        optimizer = self.optimizers["z"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()  # after clipping the gradients' norm to max_grad_norm
        self.opt_steps += 1
        if self.opt_steps % self.args.target_update_interval == 0:
            self.z_target.load_state_dict(self.z.state_dict())
        return {
            "train/loss": loss.detach(),
            "train/q_mean": z.detach().mean(),
            "td_error": per_sample.detach(),
        }

    def td_error(self, batch: Transitions) -> np.ndarray:
        """Per-sample quantile Huber loss of ``batch`` under the online network alone (an actor's
        initial priorities): midpoint levels for N, N' and K, no gradient, no RNG drawn."""
        size = len(batch)

        def levels(n: int) -> torch.Tensor:
            return midpoints(n, self.device).expand(size, n)

        b = TensorBatch.of(batch, self.device, discrete=True)
        with torch.no_grad():
            per_sample, _ = self._per_sample_loss(
                b,
                levels(self.args.n_tau),
                levels(self.args.n_tau_prime),
                levels(self.args.k),
                self.z,
                self.z,
            )
        return per_sample.cpu().numpy().astype(np.float32)
