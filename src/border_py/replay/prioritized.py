"""Proportional prioritized replay (Schaul et al. 2016): row ``i`` is drawn with probability
``p_i**alpha / sum_j p_j**alpha`` from a sum tree over the rows of a uniform buffer."""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.config import flag, fraction, non_negative, positive
from border_py.errors import ConfigError, RunError
from border_py.replay.sum_tree import MinTree, SumTree, level_sizes
from border_py.replay.uniform import UniformReplayBuffer, copy_rows
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
        non_negative("alpha", alpha, float)
        fraction("beta_start", beta_start)
        non_negative("beta_steps", beta_steps)
        positive("eps", eps)
        flag("priority_from_actors", priority_from_actors)
        self.alpha, self.beta_start, self.beta_steps, self.eps = alpha, beta_start, beta_steps, eps
        self.priority_from_actors = priority_from_actors
        self.needs_td_errors = True
        self._sum = SumTree(capacity)
        self._min = MinTree(capacity)
        self.max_priority = 1.0  # the largest |TD error| + eps seen (before the exponent)
        self.samples = 0  # calls of sample() so far: the beta schedule's position

    def _extra_nbytes(self) -> int:
        return sum(level.nbytes for tree in (self._sum, self._min) for level in tree.levels)

    @classmethod
    def _estimate_extra_nbytes(cls, capacity: int) -> int:
        return 2 * 8 * sum(level_sizes(capacity))  # the sum and min trees, float64 nodes

    @property
    def beta(self) -> float:
        """The importance-sampling exponent of the next sample."""
        if self.samples >= self.beta_steps:
            return 1.0
        return self.beta_start + (1.0 - self.beta_start) * self.samples / self.beta_steps

    def priorities(self) -> np.ndarray:
        """The stored rows' priorities ``p_i`` (after the exponent)."""
        return self._sum.leaves(slice(0, self._size)).copy()

    def _set(self, idx: np.ndarray, p: np.ndarray) -> None:
        self._sum.set(idx, p)
        self._min.set(idx, np.where(p > 0, p, np.inf))

    def push(self, batch: Transitions) -> None:
        """Append a batch (see the uniform buffer) with its actors' priorities, if it has them.

        Raises:
            RunError: an actor sent a non-finite priority (its copy of the agent diverged); the
                buffer is left as it was.
        """
        if self.priority_from_actors and batch.priority is not None:
            _check_finite(batch.priority, "priorities from an actor")
        super().push(batch)

    def _on_push(self, idx: np.ndarray, batch: Transitions, n: int) -> None:
        if self.priority_from_actors and batch.priority is not None:
            raw = np.abs(np.asarray(batch.priority, np.float64)[-n:]) + self.eps
            self.max_priority = max(self.max_priority, float(raw.max(initial=0.0)))
            p = raw**self.alpha
        else:
            p = np.full(n, self.max_priority**self.alpha)
        self._set(idx, np.where(self._frames_held(idx), p, 0.0))  # replaces the old rows' ones

    def _total(self) -> float:
        total = self._sum.total
        if total <= 0:
            raise RuntimeError("replay buffer: every stored transition has priority zero")
        return total

    def _draw(self, n: int) -> np.ndarray:
        """Stratified: one prefix sum drawn uniformly in each of ``n`` equal segments of the total."""
        total = self._total()
        values = (np.arange(n) + self.rng.random(n)) * (total / n)
        return self._sum.find_prefix(np.minimum(values, np.nextafter(total, 0)))

    def _redraw(self, n: int) -> np.ndarray:
        total = self._total()
        return self._sum.find_prefix(np.minimum(self.rng.random(n) * total, np.nextafter(total, 0)))

    def _live(self, idx: np.ndarray) -> np.ndarray:
        # A zero leaf (a forgotten row, or padding past the filled rows) comes out of a prefix
        # search only by float rounding: never use it.
        live = self._sum.leaves(idx) > 0
        live[live] = super()._live(idx[live])
        return live

    def _forget(self, idx: np.ndarray) -> None:
        self._set(idx, np.zeros(len(idx)))

    def sample(self, batch_size: int) -> Transitions:
        """``batch_size`` transitions drawn by priority, with ``weight`` and ``index`` set."""
        beta = self.beta
        idx = self._draw_usable(batch_size)
        weight = (self._sum.leaves(idx) / self._min.min) ** -beta
        batch = self._gather(idx)
        batch.weight = weight.astype(np.float32)
        batch.index = idx
        self.samples += 1
        return batch

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """Set the priorities of rows ``index`` to ``(|td_error| + eps) ** alpha``.

        Raises:
            RunError: a non-finite TD error (the agent diverged); no priority is changed.
        """
        td = np.asarray(td_error, dtype=np.float64).reshape(-1)
        if td.shape != np.shape(index):
            raise ValueError(f"td_error has shape {td.shape}, the sampled rows {np.shape(index)}")
        _check_finite(td, "TD errors")
        raw = np.abs(td) + self.eps
        self.max_priority = max(self.max_priority, float(raw.max(initial=0.0)))
        self._set(index, np.where(self._frames_held(np.asarray(index)), raw**self.alpha, 0.0))

    def state(self) -> dict[str, Any]:
        """The uniform buffer's state plus the beta position and the largest priority."""
        return super().state() | {"samples": self.samples, "max_priority": self.max_priority}

    def arrays(self) -> dict[str, np.ndarray]:
        """The rows plus their priorities (``priority``), views as well."""
        return super().arrays() | {"priority": self._sum.leaves(slice(0, self._size))}

    def continue_schedule(self, state: dict) -> None:
        """Also continue beta's annealing and the largest priority seen."""
        super().continue_schedule(state)
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])

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
        leaves = np.zeros(self.capacity)
        copy_rows(leaves, priority, int(state["size"]), int(state["next"]), self.capacity)
        self._sum.rebuild(leaves)
        self._min.rebuild(np.where(leaves > 0, leaves, np.inf))
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])


def _check_finite(values: np.ndarray, what: str) -> None:
    """Refuse NaN or infinite ``values``: one would make every priority sum NaN or infinite."""
    bad = np.size(values) - int(np.count_nonzero(np.isfinite(values)))
    if bad:
        raise RunError(
            f"{bad} non-finite {what}: the agent's values diverged (try a lower agent.lr or"
            " agent.max_grad_norm)"
        )
