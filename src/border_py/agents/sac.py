"""Soft Actor-Critic with automatic entropy tuning (Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications", arXiv:1812.05905), for continuous (Box) action spaces.

Policy: ``u ~ N(mean(s), std(s))``, ``a = tanh(u)`` in ``[-1, 1]^A``; the env receives
``center + scale * a``, the affine map onto its bounds. Log-probabilities, entropies and
``target_entropy`` are those of ``a`` in ``[-1, 1]^A``, and critics see actions in the same units
(the squashed Gaussian, its log-probability, the critics: :mod:`border_py.agents.continuous`).

One update on a batch of 1-step transitions ``(s, a, R, s', d)``, ``d = gamma`` (0 after a
terminal state), in the paper's order (critics, policy, temperature, targets):

    y        = R + d * (min_i Q'_i(s', a') - alpha * log pi(a'|s')),   a' ~ pi(.|s')
    J_Q      = sum_i mean[ 1/2 (Q_i(s, a) - y)^2 ]
    J_pi     = mean[ alpha * log pi(a~|s) - min_i Q_i(s, a~) ],          a~ = tanh(mean + std * eps)
    J_alpha  = -mean[ log_alpha * (log pi(a~|s) + target_entropy) ]
    Q'_i    <- tau * Q_i + (1 - tau) * Q'_i

Exploration: an exploring actor samples ``u = mean + std * eps``, ``eps`` white noise or, with
``noise_correlation`` > 0, correlated over steps
(:func:`~border_py.agents.continuous.correlated_noise`).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.base import Accepts
from border_py.agents.batch import TensorBatch, obs_tensor
from border_py.agents.checkpointed import (
    Checkpointed,
    Count,
    OptimizerStates,
    OptionalArray,
    RandomState,
    Tensor,
    Weights,
)
from border_py.agents.continuous import (
    GaussianPolicy,
    QEnsemble,
    correlated_noise,
    squashed_log_prob,
)
from border_py.agents.footprint import Footprint, sac_footprint
from border_py.agents.hparams import HParams, configured_by
from border_py.agents.inference import MLPInference
from border_py.agents.networks import flat_dim, input_scale, polyak_update
from border_py.agents.optim import Adam, Optimizers
from border_py.agents.spaces import check_spaces
from border_py.config import is_number, require
from border_py.transitions import Transitions

__all__ = ["SAC", "SACArgs", "soft_targets", "temperature_loss"]


def soft_targets(
    reward: torch.Tensor,
    discount: torch.Tensor,
    next_q: torch.Tensor,
    next_log_prob: torch.Tensor,
    alpha: torch.Tensor | float,
) -> torch.Tensor:
    """Soft TD targets ``R + d * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))``; ``next_q`` is (n, B)."""
    return reward + discount * (next_q.min(dim=0).values - alpha * next_log_prob)


def temperature_loss(
    log_alpha: torch.Tensor, log_prob: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """``-mean(log_alpha * (log pi + target_entropy))``: descending it raises alpha while the
    policy's entropy ``-mean(log pi)`` is below ``target_entropy`` and lowers it while above."""
    return -(log_alpha * (log_prob.detach() + target_entropy)).mean()


def _noise_correlation(key: str, value: Any) -> None:
    require(key, is_number(value) and 0 <= value < 1, "in [0, 1) (0: white policy noise)", value)


@dataclass(frozen=True)
class SACArgs(HParams):
    """SAC's hyper-parameters (the keys of ``conf/agent/sac.yaml``)."""

    rules = {"noise_correlation": _noise_correlation}

    hidden_sizes: Sequence[int] = (256, 256)
    """Widths of the hidden layers of the policy and of each critic."""
    actor_lr: float = 3e-4
    """Adam learning rate of the policy."""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics."""
    alpha_lr: float = 3e-4
    """Adam learning rate of ``log_alpha`` (with ``learn_alpha``)."""
    adam_eps: float = 1e-8
    """Adam's epsilon, for all three optimizers."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """Must be 1 (see :class:`SAC`)."""
    batch_size: int = 256
    """Transitions per optimization step."""
    tau: float = 0.005
    """Polyak coefficient of the target critics, applied every opt step."""
    n_critics: int = 2
    """Q-networks; targets and the policy loss use their minimum."""
    alpha: float = 1.0
    """The entropy coefficient: its initial value (``learn_alpha``) or its fixed value."""
    learn_alpha: bool = True
    """Tune alpha toward ``target_entropy`` (automatic entropy tuning)."""
    target_entropy: float | None = None
    """The entropy alpha is tuned toward (None: ``-|A|``, the paper's heuristic)."""
    random_steps: int = 1000
    """Env steps of uniformly random actions before the policy acts, counted in the run's env steps,
    all actors together (a sampler moves the agent there before each exploring call:
    :mod:`border_py.actors.clock`), so the random phase ends at the same total env step whatever the
    actors, and a resumed run does not repeat it."""
    noise_correlation: float = 0.0
    """Rho in [0, 1) of the exploring policy's noise (see the module docstring): 0 samples the
    policy with white noise (the paper's SAC), 0.99 keeps pushes for about 100 steps. Each env row
    of ``act``'s batch has its own noise, which runs on across episodes."""

    def __post_init__(self) -> None:
        super().__post_init__()
        require(
            "n_step",
            self.n_step == 1,
            "1 for SAC (n-step returns would drop the entropy terms of the intermediate states)",
            self.n_step,
        )


class SAC(Checkpointed):
    """Soft Actor-Critic agent with a tanh-squashed Gaussian policy and ``n_critics`` Q-networks.

    Actors receive the policy network alone (:meth:`policy_state`). SAC reports no per-sample TD
    errors, so it does not drive prioritized replay (its batches' ``weight`` is not used).
    Observations are flattened (uint8 ones scaled by 1/255).

    Transitions must be 1-step (``n_step=1``): an n-step target would need the entropy bonus
    ``-alpha * log pi(a_t|s_t)`` of every intermediate state, which an n-step transition
    (``R = sum_t gamma^t r_t``) no longer holds, so ``n_step > 1`` is refused.

    Args:
        observation_space: the env's (Box) observation space.
        action_space: the env's Box action space (finite bounds).
        device: where the learner's networks live (``cpu`` or ``cuda``).
        seed: seeds network initialization, exploration noise and the update's action samples.
        **hparams: the fields of :class:`SACArgs`.
    """

    accepts = Accepts(observation=(gym.spaces.Box,), action=(gym.spaces.Box,), bounded_actions=True)
    acting_module = "policy"  # all an actor needs
    discrete_actions = False  # TensorUpdate: actions as float32
    checkpointed = {
        "policy": Weights("policy"),
        "critics": Weights("critics"),
        "critic_targets": Weights("critic_targets"),
        "log_alpha": Tensor("log_alpha"),
        "optimizers": OptimizerStates(),
        "env_steps": Count("env_steps"),
        "opt_steps": Count("opt_steps"),
        "rng": RandomState("rng"),  # random steps and exploration noise
        "generator": RandomState("generator"),  # the update's action samples
        "noise": OptionalArray("noise", "act_dim"),  # none before noise_correlation existed
    }

    @configured_by(SACArgs)
    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        **hparams: Any,
    ) -> None:
        check_spaces(type(self), observation_space, action_space)
        args = self.args = SACArgs(**hparams)
        assert isinstance(action_space, gym.spaces.Box)  # check_spaces made sure
        self.gamma, self.n_step, self.batch_size = args.gamma, args.n_step, args.batch_size
        self.device = torch.device(device)
        self._action_bounds(action_space)
        self.target_entropy = float(
            -self.act_dim if args.target_entropy is None else args.target_entropy
        )

        obs_dim, scale = flat_dim(observation_space.shape or ()), input_scale(observation_space)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            policy = GaussianPolicy(obs_dim, args.hidden_sizes, self.act_dim, scale)
            critics = QEnsemble(obs_dim, self.act_dim, args.hidden_sizes, args.n_critics, scale)
        self.policy, self.critics = policy.to(self.device), critics.to(self.device)
        self.critic_targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_alpha = torch.tensor(
            math.log(args.alpha), device=self.device, requires_grad=args.learn_alpha
        )
        self.optimizers = Optimizers(
            actor=Adam(list(self.policy.parameters()), args.actor_lr, args.adam_eps),
            critic=Adam(list(self.critics.parameters()), args.critic_lr, args.adam_eps),
        )
        if args.learn_alpha:
            self.optimizers["alpha"] = Adam([self.log_alpha], args.alpha_lr, args.adam_eps)
        self.fast_policy = MLPInference.of(self.policy.body)
        self.rng = np.random.default_rng(seed)  # acting: random steps and exploration noise
        self.generator = torch.Generator(device=self.device)  # the update's action samples
        self.generator.manual_seed(seed)
        self.noise: np.ndarray | None = None  # the correlated noise of each env row (rho > 0)
        self.env_steps = 0  # exploration position: the run's env steps (actors/clock.py)
        self.opt_steps = 0

    @classmethod
    def footprint(
        cls, observation_space: gym.Space, action_space: gym.Space, **hparams: Any
    ) -> Footprint:
        """What the agent of ``hparams`` takes on these spaces, without building it (see
        :func:`~border_py.agents.footprint.sac_footprint`)."""
        args = SACArgs(**hparams)
        return sac_footprint(
            observation_space, action_space, args.hidden_sizes, args.n_critics, args.batch_size
        )

    def _action_bounds(self, action_space: gym.spaces.Box) -> None:
        """The affine map of actions in ``[-1, 1]^A`` onto the env's bounds."""
        self.action_shape = tuple(action_space.shape)
        self.act_dim = flat_dim(self.action_shape)
        self.low = action_space.low.astype(np.float32).reshape(-1)
        self.high = action_space.high.astype(np.float32).reshape(-1)
        self.center = (self.high + self.low) / 2
        self.scale = (self.high - self.low) / 2
        self._center_t = torch.as_tensor(self.center, device=self.device)
        self._scale_t = torch.as_tensor(self.scale, device=self.device)

    def set_exploration_step(self, env_steps: int) -> None:
        """Act from now on as at the run's env step ``env_steps`` (random steps left or not)."""
        self.env_steps = env_steps

    def to_env(self, squashed: np.ndarray) -> np.ndarray:
        """Actions in ``[-1, 1]^A`` (rows) mapped onto the env's bounds, float32, env-shaped."""
        action = np.clip(self.center + self.scale * squashed, self.low, self.high)
        return action.astype(np.float32).reshape(len(squashed), *self.action_shape)

    def policy_outputs(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The policy's ``(mean, log_std)`` for a batch of observations, float32 numpy (B, A) each."""
        if self.fast_policy is not None:
            out = self.fast_policy(obs)
            mean, log_std = np.split(out, 2, axis=1)
            return mean, np.clip(log_std, GaussianPolicy.LOG_STD_MIN, GaussianPolicy.LOG_STD_MAX)
        with torch.inference_mode():
            mean_t, log_std_t = self.policy(obs_tensor(obs, self.device))
        return mean_t.cpu().numpy(), log_std_t.cpu().numpy()

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Actions for a batch of observations: ``tanh(mean)`` (greedy), a policy sample
        (``explore``), or uniformly random ones during the first ``random_steps`` env steps."""
        n = len(obs)
        if explore and self.env_steps < self.args.random_steps:
            self.env_steps += n
            return self.to_env(self.rng.uniform(-1.0, 1.0, (n, self.act_dim)))
        u, log_std = self.policy_outputs(obs)
        if explore:  # u ~ N(mean, std)
            u = u + np.exp(log_std) * self.exploration_noise(u.shape)
            self.env_steps += n
        return self.to_env(np.tanh(u))

    def exploration_noise(self, shape: tuple[int, ...]) -> np.ndarray:
        """The standard normal ``eps`` of this step's policy samples, one row per env: white, or
        the next step of each row's AR(1) process (``noise_correlation`` > 0; a new batch shape
        starts the processes afresh from their stationary N(0, 1))."""
        xi = self.rng.standard_normal(shape, dtype=np.float32)
        if self.args.noise_correlation == 0:
            return xi
        if self.noise is None or self.noise.shape != shape:
            self.noise = xi
        else:
            self.noise = correlated_noise(self.noise, float(self.args.noise_correlation), xi)
        return self.noise

    def exploration_stats(self) -> dict[str, float]:
        """``train/random_phase``: 1 while the next exploring actions are uniformly random (the
        first ``random_steps``), then 0: SAC explores by sampling its policy (its entropy is in the
        update's metrics)."""
        return {"train/random_phase": float(self.env_steps < self.args.random_steps)}

    def standard_normal(self, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
        """The update's N(0, 1) draws, from :attr:`generator` on the learner's device."""
        return torch.randn(shape, generator=self.generator, device=self.device, dtype=dtype)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized action ``tanh(mean + std * eps)`` in ``[-1, 1]^A`` and its log-prob."""
        mean, log_std = self.policy(obs)
        u = mean + log_std.exp() * self.standard_normal(mean.shape, mean.dtype)
        return torch.tanh(u), squashed_log_prob(u, mean, log_std)

    def update(self, batch: Transitions) -> dict[str, Any]:
        """One step on the critics, the policy and alpha, then the target critics' Polyak update."""
        return self.update_tensors(TensorBatch.of(batch, self.device, discrete=False))

    def update_tensors(self, b: TensorBatch) -> dict[str, Any]:
        """:meth:`update` on a batch already on the device."""
        action = (
            b.action.reshape(len(b.action), -1) - self._center_t
        ) / self._scale_t  # in [-1, 1]
        opt = self.optimizers
        alpha = self.log_alpha.detach().exp()

        with torch.no_grad():  # y = R + d * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))
            next_action, next_log_prob = self.sample(b.next_obs)
            next_q = self.critic_targets(b.next_obs, next_action)
            target = soft_targets(b.reward, b.discount, next_q, next_log_prob, alpha)
        q = self.critics(b.obs, action)
        critic_loss = 0.5 * ((q - target) ** 2).mean(dim=1).sum()  # J_Q, summed over critics
        opt["critic"].zero_grad()
        critic_loss.backward()
        opt["critic"].step()

        self.critics.requires_grad_(False)  # the policy loss differentiates through Q, not into it
        new_action, log_prob = self.sample(b.obs)  # a~ = tanh(mean + std * eps)
        actor_loss = (alpha * log_prob - self.critics(b.obs, new_action).min(dim=0).values).mean()
        opt["actor"].zero_grad()
        actor_loss.backward()  # J_pi
        opt["actor"].step()
        self.critics.requires_grad_(True)

        metrics = {
            "train/critic_loss": critic_loss.detach(),
            "train/actor_loss": actor_loss.detach(),
            "train/entropy": -log_prob.detach().mean(),
            "train/q_mean": q.detach().mean(),
        }
        if self.args.learn_alpha:  # J_alpha
            alpha_loss = temperature_loss(self.log_alpha, log_prob, self.target_entropy)
            opt["alpha"].zero_grad()
            alpha_loss.backward()
            opt["alpha"].step()
            metrics["train/alpha_loss"] = alpha_loss.detach()
        metrics["train/alpha"] = self.log_alpha.detach().exp()
        polyak_update(
            self.critics, self.critic_targets, self.args.tau
        )  # Q'_i <- tau Q_i + (1-tau) Q'_i
        self.opt_steps += 1
        return metrics
