"""Deep Q-Network (Mnih et al. 2015), with double DQN (van Hasselt et al. 2016) as an option.

Loss on a batch of n-step transitions ``(s, a, R, s', d)`` where ``d`` already holds
``gamma**k`` (0 after a terminal state):

    y = R + d * Q_target(s', argmax_a' Q(s', a'))     (double DQN)
    y = R + d * max_a' Q_target(s', a')               (DQN)
    L = huber(Q(s, a) - y)  or  (Q(s, a) - y)**2
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from border_py.agents.exploration import EpsilonGreedy, linear_epsilon
from border_py.agents.networks import cpu_weights, polyak_update, q_network
from border_py.config import flag, fraction, positive, require, widths
from border_py.errors import ConfigError
from border_py.transitions import Transitions

__all__ = ["DQN", "dqn_targets", "linear_epsilon"]


def dqn_targets(
    reward: torch.Tensor,
    discount: torch.Tensor,
    next_q_online: torch.Tensor,
    next_q_target: torch.Tensor,
    double_dqn: bool,
) -> torch.Tensor:
    """TD targets ``R + d * Q_target(s', a*)``; ``a*`` from the online net when ``double_dqn``."""
    if double_dqn:
        best = next_q_online.argmax(dim=1, keepdim=True)
        next_value = next_q_target.gather(1, best).squeeze(1)
    else:
        next_value = next_q_target.max(dim=1).values
    return reward + discount * next_value


class DQN(EpsilonGreedy):
    """DQN agent for discrete actions, epsilon-greedy.

    The Q-network is an MLP for vector observations and the Nature CNN (Mnih et al. 2015) for
    uint8 (C, H, W) images, optionally with a dueling head (Wang et al. 2016).

    Args:
        observation_space: the env's (Box) observation space.
        action_space: the env's Discrete action space.
        device: where the learner's networks live (``cpu`` or ``cuda``).
        seed: seeds network initialization and exploration.
        hidden_sizes: widths of the fully connected hidden layers (after the CNN torso for
            images: the Nature DQN has one of 512).
        network: ``auto`` (the CNN torso for uint8 (C, H, W) observations, else an MLP),
            ``mlp`` or ``cnn``.
        dueling: a dueling head: the last hidden layer split into value and advantage streams,
            ``Q = V + A - mean_a A``.
        lr: Adam learning rate.
        gamma: discount factor.
        n_step: rewards summed per transition (returns are computed by the actors).
        batch_size: transitions per optimization step.
        double_dqn: pick next actions with the online network, value them with the target.
        loss: ``huber`` or ``mse``.
        max_grad_norm: gradient-norm clipping threshold (None: no clipping).
        target_update_interval: opt steps between hard target copies (when ``tau`` is None).
        tau: Polyak coefficient for a soft target update every opt step (None: hard copies).
        eps_start: initial exploration epsilon.
        eps_final: final exploration epsilon.
        eps_decay_steps: env steps over which epsilon decays linearly.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        hidden_sizes: Sequence[int] = (256, 256),
        network: str = "auto",
        dueling: bool = False,
        lr: float = 1e-3,
        gamma: float = 0.99,
        n_step: int = 1,
        batch_size: int = 64,
        double_dqn: bool = True,
        loss: str = "huber",
        max_grad_norm: float | None = 10.0,
        target_update_interval: int = 100,
        tau: float | None = None,
        eps_start: float = 1.0,
        eps_final: float = 0.05,
        eps_decay_steps: int = 10000,
    ) -> None:
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ConfigError(
                f"_target_: DQN needs a Discrete action space, the env has {action_space}"
            )
        positive("lr", lr)
        positive("batch_size", batch_size, int)
        positive("n_step", n_step, int)
        positive("target_update_interval", target_update_interval, int)
        fraction("gamma", gamma)
        require("loss", loss in ("huber", "mse"), "'huber' or 'mse'", loss)
        if tau is not None:
            fraction("tau", tau, open_low=True)
        require(
            "max_grad_norm",
            max_grad_norm is None or max_grad_norm > 0,
            "null or > 0",
            max_grad_norm,
        )
        widths("hidden_sizes", hidden_sizes)
        flag("double_dqn", double_dqn)
        flag("dueling", dueling)
        super().__init__(int(action_space.n), seed, eps_start, eps_final, eps_decay_steps)

        self.gamma, self.n_step, self.batch_size = gamma, n_step, batch_size
        self.double_dqn, self.loss = double_dqn, loss
        self.max_grad_norm, self.target_update_interval, self.tau = (
            max_grad_norm,
            target_update_interval,
            tau,
        )
        self.device = torch.device(device)

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.q = q_network(
                observation_space, self.n_actions, hidden_sizes, network, dueling
            ).to(self.device)
        self.q_target = copy.deepcopy(self.q).requires_grad_(False)
        self.lr = lr
        self._optimizer: torch.optim.Optimizer | None = None
        self.opt_steps = 0

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """Adam over the Q-network, created on first use: actors, which only act, never need it
        (and creating one imports torch._dynamo, seconds of start-up per process)."""
        if self._optimizer is None:
            self._optimizer = torch.optim.Adam(self.q.parameters(), lr=self.lr, fused=True)
        return self._optimizer

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Epsilon-greedy (``explore``) or greedy actions for a batch of observations."""
        with torch.no_grad():
            q = self.q(torch.as_tensor(obs, dtype=torch.float32, device=self.device))
        actions = q.argmax(dim=1).cpu().numpy()
        return self.explore(actions) if explore else actions

    reports_td_error = True  # update() returns td_error for prioritized samples (agents/base.py)

    def update(self, batch: Transitions) -> dict[str, object]:
        """One gradient step on the TD loss, then the target-network update.

        With importance-sampling weights (``batch.weight``, a prioritized sample) the loss is the
        mean of the weighted per-sample losses (each weight applied once); for a prioritized
        sample (``batch.index`` set) the metrics include ``td_error``, the per-sample
        ``|y - Q(s, a)|`` (float32 numpy), for the buffer's priority update.
        """
        obs = torch.as_tensor(batch.obs, dtype=torch.float32, device=self.device)
        next_obs = torch.as_tensor(batch.next_obs, dtype=torch.float32, device=self.device)
        action = torch.as_tensor(batch.action, dtype=torch.int64, device=self.device)
        reward = torch.as_tensor(batch.reward, device=self.device)
        discount = torch.as_tensor(batch.discount, device=self.device)

        with torch.no_grad():
            next_q_target = self.q_target(next_obs)
            next_q_online = self.q(next_obs) if self.double_dqn else next_q_target
            target = dqn_targets(reward, discount, next_q_online, next_q_target, self.double_dqn)
        q = self.q(obs).gather(1, action.unsqueeze(1)).squeeze(1)
        if self.loss == "huber":
            per_sample = F.smooth_l1_loss(q, target, reduction="none")
        else:
            per_sample = F.mse_loss(q, target, reduction="none")
        if batch.weight is not None:
            per_sample = per_sample * torch.as_tensor(batch.weight, device=self.device)
        loss = per_sample.mean()

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.q.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.opt_steps += 1

        if self.tau is not None:
            polyak_update(self.q, self.q_target, self.tau)
        elif self.opt_steps % self.target_update_interval == 0:
            self.q_target.load_state_dict(self.q.state_dict())
        metrics: dict[str, object] = {
            "train/loss": loss.detach(),
            "train/q_mean": q.detach().mean(),
        }
        if batch.index is not None:  # a numpy copy waits for the GPU: only when the buffer needs it
            metrics["td_error"] = (target - q.detach()).abs().cpu().numpy().astype(np.float32)
        return metrics

    def td_error(self, batch: Transitions) -> np.ndarray:
        """Per-sample ``|y - Q(s, a)|`` with the online network for the bootstrap too (an actor's
        copy has no target network): initial priorities for prioritized replay (Ape-X). No
        gradient, no state change."""
        with torch.no_grad():
            obs = torch.as_tensor(batch.obs, dtype=torch.float32, device=self.device)
            next_obs = torch.as_tensor(batch.next_obs, dtype=torch.float32, device=self.device)
            action = torch.as_tensor(batch.action, dtype=torch.int64, device=self.device)
            reward = torch.as_tensor(batch.reward, device=self.device)
            discount = torch.as_tensor(batch.discount, device=self.device)
            next_q = self.q(next_obs)
            target = dqn_targets(reward, discount, next_q, next_q, self.double_dqn)
            q = self.q(obs).gather(1, action.unsqueeze(1)).squeeze(1)
            return (target - q).abs().cpu().numpy().astype(np.float32)

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The online Q-network's weights on CPU."""
        return cpu_weights(self.q)

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load online Q-network weights."""
        self.q.load_state_dict(state)

    def state_dict(self) -> dict[str, object]:
        """Networks, optimizer, counters and exploration RNG."""
        return {
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "env_steps": self.env_steps,
            "opt_steps": self.opt_steps,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict`."""
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.env_steps = int(state["env_steps"])
        self.opt_steps = int(state["opt_steps"])
        self.rng.bit_generator.state = state["rng"]
