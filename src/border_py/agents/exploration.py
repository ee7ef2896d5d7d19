"""Epsilon-greedy exploration shared by the value-based agents (DQN, IQN).

The schedule runs in the run's env steps, all actors together: before each exploring call a
sampler moves it to the run's position (``set_exploration_step``, :mod:`border_py.actors.clock`),
so that 1 actor, several and the serial trainer act with the same epsilon at the same total env
step, and a resumed run goes on where it stood. Between two such moves (an agent used on its own)
it counts the env steps it acted with ``explore=True``. Ape-X actors fix epsilon instead
(``set_epsilon``: one value, or one per env row of ``act``'s batch, so that every env of every actor
gets its own rung of the Ape-X ladder).
"""

from __future__ import annotations

import numpy as np

from border_py.config import fraction, non_negative

__all__ = ["EpsilonGreedy", "linear_epsilon"]


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
        eps_decay_steps: env steps of the run (all actors together) over which epsilon decays
            linearly.
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
        self.env_steps = 0  # exploration position: the run's env steps (see the module docstring)
        self.fixed_epsilon: float | np.ndarray | None = None  # set_epsilon's, else the schedule

    @property
    def epsilon(self) -> float:
        """Current exploration epsilon: the schedule's, or the fixed one (the mean of per-env ones)."""
        if self.fixed_epsilon is None:
            return linear_epsilon(
                self.env_steps, self.eps_start, self.eps_final, self.eps_decay_steps
            )
        return float(np.mean(self.fixed_epsilon))

    def set_epsilon(self, epsilon: float | np.ndarray) -> None:
        """Act with a fixed ``epsilon`` from now on (Ape-X actors): one value for every row of
        ``act``'s batch, or a 1-d array with one value per row.

        Raises:
            ValueError: an epsilon outside [0, 1], or an array that is not 1-d.
        """
        eps = np.asarray(epsilon, dtype=np.float64)
        if eps.ndim > 1 or not np.all((eps >= 0) & (eps <= 1)):
            raise ValueError(f"epsilon={epsilon!r}: must be in [0, 1], one value or one per env")
        self.fixed_epsilon = float(eps) if eps.ndim == 0 else eps

    def set_exploration_step(self, env_steps: int) -> None:
        """Act from now on with the schedule's epsilon at the run's env step ``env_steps``."""
        self.env_steps = env_steps

    def exploration_stats(self) -> dict[str, float]:
        """``train/epsilon`` (with per-env epsilons: their mean)."""
        return {"train/epsilon": self.epsilon}

    def explore(self, greedy: np.ndarray) -> np.ndarray:
        """``greedy`` actions with each replaced by a uniform one with probability epsilon (row
        ``i``'s own epsilon when they are per env); one env step per action advances the schedule.

        Raises:
            ValueError: per-env epsilons whose number differs from the batch's rows.
        """
        eps = self.fixed_epsilon if isinstance(self.fixed_epsilon, np.ndarray) else self.epsilon
        if isinstance(eps, np.ndarray) and len(eps) != len(greedy):
            raise ValueError(f"{len(eps)} per-env epsilons for a batch of {len(greedy)} envs")
        actions = greedy.copy()
        self.env_steps += len(actions)
        # one uniform u per row: u < eps explores, and then u / eps is uniform on [0, 1) too,
        # which picks the random action (one generator call per batch: a cheap env steps faster)
        u = self.rng.random(len(actions))
        explores = u < eps
        if explores.any():
            scale = eps[explores] if isinstance(eps, np.ndarray) else eps
            uniform = (u[explores] / scale * self.n_actions).astype(actions.dtype)
            actions[explores] = np.minimum(uniform, self.n_actions - 1)
        return actions
