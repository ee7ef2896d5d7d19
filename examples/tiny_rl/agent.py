"""TinyQ: a small DQN-like agent written from scratch against border-py's agent contract.

It imports nothing from border_py: the contract (docs/05-customization/agents.md) is duck-typed.
Per batch of n-step transitions ``(s, a, R, s', d)``, where the actors already put ``gamma**k``
into ``d`` (0 after a terminal state):

    y = R + d * max_a' Q_target(s', a')        L = huber(Q(s, a) - y)

Exploration is epsilon-greedy with epsilon decaying linearly over the env steps acted with
``explore=True``; the target network is a hard copy every ``target_every`` updates.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


class TinyQ:
    """Q-learning with an MLP for flat Box observations and Discrete actions.

    Args:
        observation_space: a flat Box (border passes the env's).
        action_space: a Discrete space (border passes the env's).
        device: where the networks live (border passes the learner's, ``cpu`` for actors).
        seed: seeds the network and exploration (border derives it from the run's seed).
        hidden: width of the two hidden layers.
        lr: Adam learning rate.
        gamma: discount; border's actors use it with ``n_step`` to build transitions.
        n_step: rewards summed per transition.
        batch_size: transitions per update.
        target_every: updates between hard target-network copies.
        eps_start: exploration epsilon at the first env step.
        eps_final: epsilon after ``eps_decay_steps`` exploring env steps.
        eps_decay_steps: env steps of the linear decay.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        hidden: int = 64,
        lr: float = 1e-3,
        gamma: float = 0.99,
        n_step: int = 1,
        batch_size: int = 64,
        target_every: int = 50,
        eps_start: float = 1.0,
        eps_final: float = 0.05,
        eps_decay_steps: int = 2000,
    ) -> None:
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"TinyQ needs a Discrete action space, got {action_space}")
        shape = observation_space.shape
        if not isinstance(observation_space, gym.spaces.Box) or shape is None or len(shape) != 1:
            raise ValueError(f"TinyQ needs a flat Box observation space, got {observation_space}")
        self.gamma, self.n_step, self.batch_size = gamma, n_step, batch_size
        self.target_every = target_every
        self.eps_start, self.eps_final, self.eps_decay_steps = eps_start, eps_final, eps_decay_steps
        self.n_actions = int(action_space.n)
        self.device = torch.device(device)
        with torch.random.fork_rng(devices=[]):  # seed the weights, leave the global RNG alone
            torch.manual_seed(seed)
            self.q = nn.Sequential(
                nn.Linear(shape[0], hidden),
                nn.ReLU(),
                nn.Linear(hidden, hidden),
                nn.ReLU(),
                nn.Linear(hidden, self.n_actions),
            ).to(self.device)
        self.target = copy.deepcopy(self.q).requires_grad_(False)
        self.lr = lr
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=lr)
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0  # the epsilon schedule's position: the run's env steps
        self.updates = 0

    # -- acting (actors, evaluation) --------------------------------------------------------

    @property
    def epsilon(self) -> float:
        """The exploration epsilon at the current env step."""
        done = min(self.env_steps / max(self.eps_decay_steps, 1), 1.0)
        return self.eps_start + (self.eps_final - self.eps_start) * done

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Actions (int64, shape (B,)) for a batch of observations (B, obs_dim)."""
        with torch.no_grad():
            q = self.q(torch.as_tensor(obs, dtype=torch.float32, device=self.device))
        actions = q.argmax(dim=1).cpu().numpy().astype(np.int64)
        if explore:
            random = self.rng.random(len(actions)) < self.epsilon
            actions[random] = self.rng.integers(0, self.n_actions, size=int(random.sum()))
            self.env_steps += len(actions)
        return actions

    def exploration_stats(self) -> dict[str, float]:
        """Logged as TensorBoard scalars."""
        return {"train/epsilon": self.epsilon}

    def set_exploration_step(self, env_steps: int) -> None:
        """Move the epsilon schedule to the run's env step ``env_steps`` (all actors together:
        border calls it before each exploring ``act``)."""
        self.env_steps = env_steps

    # -- learning (the learner) -------------------------------------------------------------

    def update(self, batch: Any) -> dict[str, float]:
        """One gradient step on a batch of transitions (border's ``Transitions``: numpy arrays
        ``obs``, ``action``, ``reward``, ``next_obs``, ``discount``); returns scalars to log."""
        obs = torch.as_tensor(batch.obs, dtype=torch.float32, device=self.device)
        next_obs = torch.as_tensor(batch.next_obs, dtype=torch.float32, device=self.device)
        action = torch.as_tensor(batch.action, dtype=torch.int64, device=self.device)
        reward = torch.as_tensor(batch.reward, dtype=torch.float32, device=self.device)
        discount = torch.as_tensor(batch.discount, dtype=torch.float32, device=self.device)
        with torch.no_grad():
            y = reward + discount * self.target(next_obs).max(dim=1).values
        q = self.q(obs).gather(1, action[:, None]).squeeze(1)
        loss = F.smooth_l1_loss(q, y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.updates += 1
        if self.updates % self.target_every == 0:
            self.target.load_state_dict(self.q.state_dict())
        return {"train/loss": loss.item(), "train/q_mean": q.mean().item()}

    # -- weights and checkpoints ------------------------------------------------------------

    def policy_state(self) -> dict[str, torch.Tensor]:
        """What actors and the evaluator need to act: the Q-network's weights, on CPU."""
        return {k: v.detach().cpu().clone() for k, v in self.q.state_dict().items()}

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load :meth:`policy_state`'s weights."""
        self.q.load_state_dict(state)

    def state_dict(self) -> dict[str, object]:
        """Everything training needs to continue: tensors, numbers, plain containers."""
        return {
            "q": self.q.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "env_steps": self.env_steps,
            "updates": self.updates,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict`."""
        self.q.load_state_dict(state["q"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:  # torch restores the saved lr: the config wins
            group["lr"] = self.lr
        self.env_steps = int(state["env_steps"])
        self.updates = int(state["updates"])
        self.rng.bit_generator.state = state["rng"]
