"""Epsilon-greedy exploration shared by the value-based agents (DQN, IQN).

The schedule runs in env steps acted with ``explore=True``; Ape-X actors fix epsilon instead
(``set_epsilon``), and a resumed actor continues its schedule (``set_exploration_step``).
"""

from __future__ import annotations

import numpy as np

from border_py.config import fraction, non_negative


def linear_epsilon(step: int, start: float, final: float, decay_steps: int) -> float:
    """Epsilon decaying linearly from ``start`` to ``final`` over ``decay_steps`` env steps."""
    if decay_steps <= 0 or step >= decay_steps:
        return final
    return start + (final - start) * step / decay_steps


class EpsilonGreedy:
    """Epsilon-greedy action selection over ``n_actions`` discrete actions.

    Args:
        n_actions: number of actions.
        seed: seed of the exploration generator.
        eps_start: initial epsilon.
        eps_final: final epsilon.
        eps_decay_steps: env steps over which epsilon decays linearly.
    """

    def __init__(
        self, n_actions: int, seed: int, eps_start: float, eps_final: float, eps_decay_steps: int
    ) -> None:
        non_negative("eps_decay_steps", eps_decay_steps)
        for key, eps in (("eps_start", eps_start), ("eps_final", eps_final)):
            fraction(key, eps)
        self.n_actions = n_actions
        self.eps_start, self.eps_final, self.eps_decay_steps = eps_start, eps_final, eps_decay_steps
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0  # exploration position: env steps acted with explore=True
        self.fixed_epsilon: float | None = None

    @property
    def epsilon(self) -> float:
        """Current exploration epsilon (a fixed value if set, else the linear schedule)."""
        if self.fixed_epsilon is not None:
            return self.fixed_epsilon
        return linear_epsilon(self.env_steps, self.eps_start, self.eps_final, self.eps_decay_steps)

    def set_epsilon(self, epsilon: float | None) -> None:
        """Act with a fixed ``epsilon`` from now on (Ape-X actors); None returns to the schedule."""
        self.fixed_epsilon = epsilon

    def set_exploration_step(self, env_steps: int) -> None:
        """Continue the epsilon schedule from ``env_steps`` (an actor of a resumed run)."""
        self.env_steps = env_steps

    def exploration_stats(self) -> dict[str, float]:
        """``train/epsilon``."""
        return {"train/epsilon": self.epsilon}

    def explore(self, greedy: np.ndarray) -> np.ndarray:
        """``greedy`` actions with each replaced by a uniform one with probability epsilon; one
        env step per action advances the schedule."""
        actions = greedy.copy()
        random = self.rng.random(len(actions)) < self.epsilon
        actions[random] = self.rng.integers(0, self.n_actions, size=int(random.sum()))
        self.env_steps += len(actions)
        return actions
