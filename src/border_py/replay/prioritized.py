"""Proportional prioritized replay (Schaul et al. 2016): row ``i`` is drawn with probability
``p_i**alpha / sum_j p_j**alpha`` from a sum tree over the rows of a uniform buffer."""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.errors import ConfigError
from border_py.replay.prioritization import Prioritization
from border_py.replay.uniform import UniformReplayBuffer
from border_py.transitions import Transitions

__all__ = ["PrioritizedReplayBuffer"]


class PrioritizedReplayBuffer(UniformReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) over the uniform buffer's rows.

    Row ``i`` holds priority ``p_i = (|delta_i| + eps) ** alpha`` in a sum tree (sampling) and a
    min tree (the largest importance weight). A batch of ``B`` is drawn stratified: the total
    priority is cut into ``B`` equal segments and one row is drawn from each, by a batched
    prefix-sum search (O(B log N), no loop over the batch). Importance-sampling weights
    ``w_i = (N * P(i)) ** -beta`` are divided by the largest weight any stored row can have,
    ``(N * min_j P(j)) ** -beta`` (the min tree's, as in Schaul et al.), so ``w_i = (p_i / p_min)
    ** -beta <= 1``. ``beta`` grows linearly from ``beta_start`` to 1 over ``beta_steps`` calls
    of :meth:`sample` (one per optimization step).

    New rows get the largest priority seen so far (1 at first), or, with ``priority_from_actors``,
    the TD errors the actors computed for them (Ape-X). The learner replaces the priorities of
    the rows it sampled with their new TD errors (:meth:`update_priorities`).

    Args:
        capacity: maximum number of transitions kept; the oldest are overwritten.
        seed: seed of the sampling generator.
        alpha: priority exponent (0: uniform).
        beta_start: importance-sampling exponent at the first sample.
        beta_steps: samples (opt steps) over which beta reaches 1 (0: beta is 1 throughout).
        eps: added to every |TD error| so that no row's priority is zero.
        priority_from_actors: actors compute the initial priorities of the transitions they send
            with their copy of the policy (the agent must implement ``td_error``).
        frame_stack: see :class:`UniformReplayBuffer`.
    """

    def __init__(
        self,
        capacity: int,
        seed: int | None,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_steps: int = 100000,
        eps: float = 1e-6,
        priority_from_actors: bool = False,
        frame_stack: int | None = None,
    ) -> None:
        super().__init__(capacity, seed, frame_stack)
        self.prioritization = Prioritization(
            capacity, alpha, beta_start, beta_steps, eps, priority_from_actors
        )
        self.priority_from_actors = priority_from_actors
        self.needs_td_errors = True

    def _extra_nbytes(self) -> int:
        return self.prioritization.nbytes

    @classmethod
    def _estimate_extra_nbytes(cls, capacity: int) -> int:
        return Prioritization.estimate_nbytes(capacity)

    @property
    def beta(self) -> float:
        """The importance-sampling exponent of the next sample."""
        return self.prioritization.beta

    def priorities(self) -> np.ndarray:
        """The stored rows' priorities ``p_i`` (after the exponent)."""
        return self.prioritization.leaves(self._size).copy()

    def push(self, batch: Transitions) -> None:
        """Append a batch (see the uniform buffer) with its actors' priorities, if it has them.

        Raises:
            RunError: an actor sent a non-finite priority (its copy of the agent diverged); the
                buffer is left as it was.
        """
        self.prioritization.check_pushed(batch.priority)
        super().push(batch)

    def _on_push(self, idx: np.ndarray, batch: Transitions, n: int) -> None:
        p = self.prioritization.pushed(n, batch.priority)
        self._set_held(idx, p)  # replaces the old rows' ones

    def _set_held(self, idx: np.ndarray, p: np.ndarray) -> None:
        """Rows ``idx`` get priorities ``p``, those whose frames are gone 0."""
        self.prioritization.set(idx, np.where(self._frames_held(idx), p, 0.0))

    def _draw(self, n: int) -> np.ndarray:
        return self.prioritization.draw(self.rng, n)

    def _redraw(self, n: int) -> np.ndarray:
        return self.prioritization.redraw(self.rng, n)

    def _live(self, idx: np.ndarray) -> np.ndarray:
        # A zero leaf (a forgotten row, or padding past the filled rows) comes out of a prefix
        # search only by float rounding: never use it.
        live = self.prioritization.sums.leaves(idx) > 0
        live[live] = super()._live(idx[live])
        return live

    def _forget(self, idx: np.ndarray) -> None:
        self.prioritization.set(idx, np.zeros(len(idx)))

    def sample(self, batch_size: int) -> Transitions:
        """``batch_size`` transitions drawn by priority, with ``weight`` and ``index`` set."""
        idx = self._draw_usable(batch_size)
        weight = self.prioritization.weigh(idx)
        batch = self._gather(idx)
        batch.weight = weight
        batch.index = idx
        return batch

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """Set the priorities of rows ``index`` to ``(|td_error| + eps) ** alpha``.

        Raises:
            RunError: a non-finite TD error (the agent diverged); no priority is changed.
        """
        p = self.prioritization.updated(index, td_error)
        self._set_held(np.asarray(index), p)

    def state(self) -> dict[str, Any]:
        """The uniform buffer's state plus the beta position and the largest priority."""
        return super().state() | self.prioritization.state()

    def arrays(self) -> dict[str, np.ndarray]:
        """The rows plus their priorities (``priority``), views as well."""
        return super().arrays() | {"priority": self.prioritization.leaves(self._size)}

    def continue_schedule(self, state: dict) -> None:
        """Also continue beta's annealing and the largest priority seen."""
        super().continue_schedule(state)
        self.prioritization.continue_schedule(state)

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (priorities move with their rows)."""
        arrays = dict(arrays)
        priority = arrays.pop("priority", None)
        if priority is None:
            raise ConfigError(
                "replay_buffer=prioritized: the checkpoint's replay buffer has no priorities"
                " (it was saved by a uniform buffer)"
            )
        super().load(state, arrays)
        self.prioritization.load(state, priority)
