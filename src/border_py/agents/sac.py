"""Soft Actor-Critic with automatic entropy tuning (Haarnoja et al. 2018, "Soft Actor-Critic
Algorithms and Applications", arXiv:1812.05905), for continuous (Box) action spaces.

Policy: ``u ~ N(mean(s), std(s))``, ``a = tanh(u)`` in ``[-1, 1]^A``; the env receives
``center + scale * a``, the affine map onto its bounds. The log-probability of the squashed
action is the Gaussian's corrected by the change of variables (the paper's appendix C):

    log pi(a|s) = sum_i [ log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2) ]

Log-probabilities, entropies and ``target_entropy`` are those of ``a`` in ``[-1, 1]^A``, as in the
reference implementation and SB3: the affine map to the env's bounds would only add the constant
``-sum_i log(scale_i)``, and leaving it out makes ``target_entropy = -|A|`` mean the same for
every env. Critics see actions in the same ``[-1, 1]`` units.

One update on a batch of n-step transitions ``(s, a, R, s', d)``, ``d = gamma**k`` (0 after a
terminal state), in the paper's order (critics, policy, temperature, targets):

    y        = R + d * (min_i Q'_i(s', a') - alpha * log pi(a'|s')),   a' ~ pi(.|s')
    J_Q      = sum_i mean[ 1/2 (Q_i(s, a) - y)^2 ]
    J_pi     = mean[ alpha * log pi(a~|s) - min_i Q_i(s, a~) ],          a~ = tanh(mean + std * eps)
    J_alpha  = -mean[ log_alpha * (log pi(a~|s) + target_entropy) ]
    Q'_i    <- tau * Q_i + (1 - tau) * Q'_i
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from border_py.agents.networks import (
    GaussianPolicy,
    QEnsemble,
    cpu_weights,
    flat_dim,
    polyak_update,
)
from border_py.config import flag, fraction, non_negative, positive, require, widths
from border_py.errors import ConfigError
from border_py.transitions import Transitions

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


class SAC:
    """Soft Actor-Critic agent with a tanh-squashed Gaussian policy and ``n_critics`` Q-networks.

    Actors receive the policy network alone (:meth:`policy_state`). SAC reports no per-sample TD
    errors, so it does not drive prioritized replay (its batches' ``weight`` is not used).

    Args:
        observation_space: the env's (Box) observation space.
        action_space: the env's Box action space (finite bounds).
        device: where the learner's networks live (``cpu`` or ``cuda``).
        seed: seeds network initialization, exploration noise and the update's action samples.
        hidden_sizes: widths of the hidden layers of the policy and of each critic.
        actor_lr: Adam learning rate of the policy.
        critic_lr: Adam learning rate of the critics.
        alpha_lr: Adam learning rate of ``log_alpha`` (with ``learn_alpha``).
        gamma: discount factor.
        n_step: rewards summed per transition (returns are computed by the actors).
        batch_size: transitions per optimization step.
        tau: Polyak coefficient of the target critics, applied every opt step.
        n_critics: Q-networks; targets and the policy loss use their minimum.
        alpha: the entropy coefficient: its initial value (``learn_alpha``) or its fixed value.
        learn_alpha: tune alpha toward ``target_entropy`` (automatic entropy tuning).
        target_entropy: the entropy alpha is tuned toward (None: ``-|A|``, the paper's heuristic).
        random_steps: env steps of uniformly random actions before the policy acts, counted in the
            agent's own exploring env steps (each actor's, in the async trainer; a resumed actor
            continues its count).
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        hidden_sizes: Sequence[int] = (256, 256),
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        alpha_lr: float = 3e-4,
        gamma: float = 0.99,
        n_step: int = 1,
        batch_size: int = 256,
        tau: float = 0.005,
        n_critics: int = 2,
        alpha: float = 1.0,
        learn_alpha: bool = True,
        target_entropy: float | None = None,
        random_steps: int = 1000,
    ) -> None:
        bounded = isinstance(action_space, gym.spaces.Box) and bool(
            np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))
        )
        if not bounded:
            raise ConfigError(
                f"_target_: SAC needs a continuous (Box) action space with finite bounds, the env"
                f" has {action_space} (for discrete actions use agent=dqn)"
            )
        for key, lr in (("actor_lr", actor_lr), ("critic_lr", critic_lr), ("alpha_lr", alpha_lr)):
            positive(key, lr)
        positive("batch_size", batch_size, int)
        positive("n_step", n_step, int)
        positive("n_critics", n_critics, int)
        positive("alpha", alpha)
        non_negative("random_steps", random_steps)
        fraction("gamma", gamma)
        fraction("tau", tau, open_low=True)
        flag("learn_alpha", learn_alpha)
        number = isinstance(target_entropy, (int, float)) and not isinstance(target_entropy, bool)
        require(
            "target_entropy", target_entropy is None or number, "null or a number", target_entropy
        )
        widths("hidden_sizes", hidden_sizes)

        self.gamma, self.n_step, self.batch_size = gamma, n_step, batch_size
        self.tau, self.learn_alpha, self.random_steps = tau, learn_alpha, random_steps
        self.actor_lr, self.critic_lr, self.alpha_lr = actor_lr, critic_lr, alpha_lr
        self.action_shape = tuple(action_space.shape)
        self.act_dim = flat_dim(self.action_shape)
        self.target_entropy = float(-self.act_dim if target_entropy is None else target_entropy)
        self.low = action_space.low.astype(np.float32).reshape(-1)
        self.high = action_space.high.astype(np.float32).reshape(-1)
        self.center = (self.high + self.low) / 2
        self.scale = (self.high - self.low) / 2
        self.device = torch.device(device)

        obs_dim = flat_dim(observation_space.shape)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.policy = GaussianPolicy(obs_dim, hidden_sizes, self.act_dim).to(self.device)
            self.critics = QEnsemble(obs_dim, self.act_dim, hidden_sizes, n_critics).to(self.device)
        self.critic_targets = copy.deepcopy(self.critics).requires_grad_(False)
        self.log_alpha = torch.tensor(
            math.log(alpha), device=self.device, requires_grad=learn_alpha
        )
        self._center_t = torch.as_tensor(self.center, device=self.device)
        self._scale_t = torch.as_tensor(self.scale, device=self.device)
        self._optimizers: dict[str, torch.optim.Optimizer] | None = None
        self.rng = np.random.default_rng(seed)  # acting: random steps and exploration noise
        self.generator = torch.Generator(device=self.device)  # the update's action samples
        self.generator.manual_seed(seed)
        self.env_steps = 0  # exploration position: env steps acted with explore=True
        self.opt_steps = 0

    @property
    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Adam for the policy, the critics and ``log_alpha``, created on first use: actors, which
        only act, never need them (and creating one imports torch._dynamo, seconds per process)."""
        if self._optimizers is None:
            self._optimizers = {
                "actor": torch.optim.Adam(self.policy.parameters(), lr=self.actor_lr, fused=True),
                "critic": torch.optim.Adam(
                    self.critics.parameters(), lr=self.critic_lr, fused=True
                ),
            }
            if self.learn_alpha:
                self._optimizers["alpha"] = torch.optim.Adam(
                    [self.log_alpha], lr=self.alpha_lr, fused=True
                )
        return self._optimizers

    def set_exploration_step(self, env_steps: int) -> None:
        """Continue from ``env_steps`` exploring env steps (an actor of a resumed run)."""
        self.env_steps = env_steps

    def to_env(self, squashed: np.ndarray) -> np.ndarray:
        """Actions in ``[-1, 1]^A`` (rows) mapped onto the env's bounds, float32, env-shaped."""
        action = np.clip(self.center + self.scale * squashed, self.low, self.high)
        return action.astype(np.float32).reshape(len(squashed), *self.action_shape)

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Actions for a batch of observations: ``tanh(mean)`` (greedy), a policy sample
        (``explore``), or uniformly random ones during the first ``random_steps`` env steps."""
        n = len(obs)
        if explore and self.env_steps < self.random_steps:
            self.env_steps += n
            return self.to_env(self.rng.uniform(-1.0, 1.0, (n, self.act_dim)))
        with torch.no_grad():
            mean, log_std = self.policy(
                torch.as_tensor(obs, dtype=torch.float32, device=self.device)
            )
        u = mean.cpu().numpy()
        if explore:
            noise = self.rng.standard_normal(u.shape, dtype=np.float32)
            u = u + np.exp(log_std.cpu().numpy()) * noise
            self.env_steps += n
        return self.to_env(np.tanh(u))

    def exploration_stats(self) -> dict[str, float]:
        """Nothing: SAC explores by sampling its policy (its entropy is in the update's metrics)."""
        return {}

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterized action ``tanh(mean + std * eps)`` in ``[-1, 1]^A`` and its log-prob."""
        mean, log_std = self.policy(obs)
        eps = torch.randn(
            mean.shape, generator=self.generator, device=self.device, dtype=mean.dtype
        )
        u = mean + log_std.exp() * eps
        return torch.tanh(u), squashed_log_prob(u, mean, log_std)

    def update(self, batch: Transitions) -> dict[str, float]:
        """One step on the critics, the policy and alpha, then the target critics' Polyak update."""
        device = self.device
        obs = torch.as_tensor(batch.obs, dtype=torch.float32, device=device)
        next_obs = torch.as_tensor(batch.next_obs, dtype=torch.float32, device=device)
        action = torch.as_tensor(batch.action, dtype=torch.float32, device=device)
        action = (action.reshape(len(action), -1) - self._center_t) / self._scale_t
        reward = torch.as_tensor(batch.reward, dtype=torch.float32, device=device)
        discount = torch.as_tensor(batch.discount, dtype=torch.float32, device=device)
        opt = self.optimizers
        alpha = self.log_alpha.detach().exp()

        with torch.no_grad():  # soft TD target
            next_action, next_log_prob = self.sample(next_obs)
            next_q = self.critic_targets(next_obs, next_action)
            target = soft_targets(reward, discount, next_q, next_log_prob, alpha)
        q = self.critics(obs, action)
        critic_loss = 0.5 * ((q - target) ** 2).mean(dim=1).sum()
        opt["critic"].zero_grad(set_to_none=True)
        critic_loss.backward()
        opt["critic"].step()

        self.critics.requires_grad_(False)  # the policy loss differentiates through Q, not into it
        new_action, log_prob = self.sample(obs)
        actor_loss = (alpha * log_prob - self.critics(obs, new_action).min(dim=0).values).mean()
        opt["actor"].zero_grad(set_to_none=True)
        actor_loss.backward()
        opt["actor"].step()
        self.critics.requires_grad_(True)

        metrics = {
            "train/critic_loss": critic_loss.detach(),
            "train/actor_loss": actor_loss.detach(),
            "train/entropy": -log_prob.detach().mean(),
            "train/q_mean": q.detach().mean(),
        }
        if self.learn_alpha:
            alpha_loss = temperature_loss(self.log_alpha, log_prob, self.target_entropy)
            opt["alpha"].zero_grad(set_to_none=True)
            alpha_loss.backward()
            opt["alpha"].step()
            metrics["train/alpha_loss"] = alpha_loss.detach()
        metrics["train/alpha"] = self.log_alpha.detach().exp()
        polyak_update(self.critics, self.critic_targets, self.tau)
        self.opt_steps += 1
        return metrics

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The policy network's weights on CPU (all an actor needs)."""
        return cpu_weights(self.policy)

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load policy weights."""
        self.policy.load_state_dict(state)

    def state_dict(self) -> dict[str, object]:
        """Networks, targets, ``log_alpha``, optimizers, counters and RNG states."""
        return {
            "policy": self.policy.state_dict(),
            "critics": self.critics.state_dict(),
            "critic_targets": self.critic_targets.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "optimizers": {k: v.state_dict() for k, v in self.optimizers.items()},
            "env_steps": self.env_steps,
            "opt_steps": self.opt_steps,
            "rng": self.rng.bit_generator.state,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict`."""
        self.policy.load_state_dict(state["policy"])
        self.critics.load_state_dict(state["critics"])
        self.critic_targets.load_state_dict(state["critic_targets"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        saved = state["optimizers"]
        if set(saved) != set(self.optimizers):
            raise KeyError(f"optimizers {sorted(saved)}, the agent has {sorted(self.optimizers)}")
        for key, optimizer in self.optimizers.items():
            optimizer.load_state_dict(saved[key])
        self.env_steps = int(state["env_steps"])
        self.opt_steps = int(state["opt_steps"])
        self.rng.bit_generator.state = state["rng"]
        self.generator.set_state(state["generator"])
