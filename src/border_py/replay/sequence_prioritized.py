"""Prioritized sequence replay (R2D2): the sequence ring of :mod:`border_py.replay.sequence_replay`
sampled by priority, as :mod:`border_py.replay.prioritized` samples transitions."""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.config import flag, fraction, non_negative, positive
from border_py.errors import ConfigError
from border_py.replay.chunked import copy_ring
from border_py.replay.prioritized import _check_finite
from border_py.replay.sequence_replay import SequenceReplayBuffer
from border_py.replay.sum_tree import MinTree, SumTree, level_sizes
from border_py.sequences import Sequences

__all__ = ["PrioritizedSequenceReplayBuffer"]


class PrioritizedSequenceReplayBuffer(SequenceReplayBuffer):
    """Prioritized sequence replay, as the transition buffer's
    (:class:`~border_py.replay.prioritized.PrioritizedReplayBuffer`) over sequences.

    A row's priority is what the learner reports for it (R2D2's ``eta * max_t |delta_t| +
    (1 - eta) * mean_t |delta_t|`` over its masked steps): row ``i`` holds ``p_i = (priority_i +
    eps) ** alpha`` in a sum tree and a min tree, a batch is drawn stratified over the total, and
    importance-sampling weights are ``w_i = (p_i / p_min) ** -beta <= 1``, ``beta`` growing
    linearly from ``beta_start`` to 1 over ``beta_steps`` samples. New rows get the largest
    priority seen so far (1 at first), or with ``priority_from_actors`` the actor's.

    Args:
        capacity: sequences kept at most; the oldest are overwritten.
        seed: seed of the sampling generator.
        alpha: priority exponent (R2D2: 0.9; 0 is uniform).
        beta_start: importance-sampling exponent at the first sample (R2D2: 0.6).
        beta_steps: samples over which beta reaches 1 (0: beta is 1 throughout).
        eps: added to every priority so that none is zero.
        priority_from_actors: actors send initial priorities with their sequences.
        frame_stack: must be None (see the uniform buffer).
        steps_per_sequence: the ring's env steps per sequence of ``capacity`` (see the uniform
            buffer).
    """

    needs_td_errors = True

    def __init__(
        self,
        capacity: int,
        seed: int | None,
        alpha: float = 0.9,
        beta_start: float = 0.6,
        beta_steps: int = 100000,
        eps: float = 1e-6,
        priority_from_actors: bool = False,
        frame_stack: int | None = None,
        steps_per_sequence: int | None = None,
    ) -> None:
        super().__init__(capacity, seed, frame_stack, steps_per_sequence)
        non_negative("alpha", alpha, float)
        fraction("beta_start", beta_start)
        non_negative("beta_steps", beta_steps)
        positive("eps", eps)
        flag("priority_from_actors", priority_from_actors)
        self.alpha, self.beta_start, self.beta_steps, self.eps = alpha, beta_start, beta_steps, eps
        self.priority_from_actors = priority_from_actors
        self._sum = SumTree(capacity)
        self._min = MinTree(capacity)
        self.max_priority = 1.0  # the largest priority + eps seen (before the exponent)
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

    def _filled(self) -> int:
        """Rows ever written (the slots in use)."""
        return min(self.rows_written, self.capacity)

    def priorities(self) -> np.ndarray:
        """The priorities ``p_i`` (after the exponent) of the slots in use (0: a row that left)."""
        return self._sum.leaves(slice(0, self._filled())).copy()

    def _set(self, idx: np.ndarray, raw: np.ndarray) -> None:
        """Rows ``idx`` get priorities ``raw`` (+ eps, before the exponent)."""
        self.max_priority = max(self.max_priority, float(np.max(raw, initial=0.0)))
        p = raw**self.alpha
        self._sum.set(idx, p)
        self._min.set(idx, p)

    def push(self, batch: Sequences, key: np.ndarray | None = None) -> None:
        """Append a batch (see the uniform buffer; ``key``: its sequences' keys) with its actor's
        priorities, if it has them.

        Raises:
            RunError: a non-finite priority from an actor; the buffer is left as it was.
        """
        if self.priority_from_actors and batch.priority is not None:
            _check_finite(batch.priority, "priorities from an actor")
        super().push(batch, key)

    def _on_push(self, idx: np.ndarray, batch: Sequences, n: int) -> None:
        if self.priority_from_actors and batch.priority is not None:
            self._set(idx, np.abs(np.asarray(batch.priority, np.float64)[-n:]) + self.eps)
        else:
            self._set(idx, np.full(n, self.max_priority))

    def _on_evict(self, idx: np.ndarray) -> None:
        self._sum.set(idx, 0.0)
        self._min.set(idx, np.inf)

    def _draw(self, n: int) -> np.ndarray:
        """Stratified: one prefix sum drawn uniformly in each of ``n`` equal segments of the total."""
        total = self._sum.total
        values = (np.arange(n) + self.rng.random(n)) * (total / n)
        return self._sum.find_prefix(np.minimum(values, np.nextafter(total, 0)))

    def sample(self, batch_size: int) -> Sequences:
        """``batch_size`` sequences drawn by priority, with ``weight`` and ``index`` set."""
        beta = self.beta
        idx, batch = self._drawn(batch_size)
        batch.weight = ((self._sum.leaves(idx) / self._min.min) ** -beta).astype(np.float32)
        batch.index = idx
        self.samples += 1
        return batch

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """Set the priorities of rows ``index`` to ``(|td_error| + eps) ** alpha``, ``td_error``
        being each row's mix of its absolute TD errors.

        Raises:
            RunError: a non-finite priority (the agent diverged); no priority is changed.
        """
        td = np.asarray(td_error, dtype=np.float64).reshape(-1)
        if td.shape != np.shape(index):
            raise ValueError(f"td_error has shape {td.shape}, the sampled rows {np.shape(index)}")
        _check_finite(td, "TD errors")
        index = np.asarray(index)
        live = np.ones(len(index), bool) if self.store is None else self.store.live(index)
        self._set(index[live], np.abs(td[live]) + self.eps)  # rows that left stay out

    def state(self) -> dict[str, Any]:
        """The uniform buffer's state plus the beta position and the largest priority."""
        return super().state() | {"samples": self.samples, "max_priority": self.max_priority}

    def arrays(self) -> dict[str, np.ndarray]:
        """The steps and rows plus the rows' priorities (``priority``), views as well."""
        arrays = super().arrays()
        if arrays:
            arrays["priority"] = self._sum.leaves(slice(0, self._filled()))
        return arrays

    def continue_schedule(self, state: dict) -> None:
        """Also continue beta's annealing and the largest priority seen."""
        super().continue_schedule(state)
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (priorities move with their rows).

        Raises:
            ConfigError: the checkpoint has no priorities, or more sequences than ``capacity``.
        """
        arrays = dict(arrays)
        priority = arrays.pop("priority", None)
        if priority is None and arrays:
            raise ConfigError(
                "replay_buffer: the checkpoint's sequence replay has no priorities (it was saved"
                " by a uniform buffer)"
            )
        super().load(state, arrays)
        leaves = np.zeros(self.capacity)
        if self.store is not None and priority is not None:
            saved, store = state["store"], self.store
            first = store.rows_written - store.size
            copy_ring(
                leaves,
                priority,
                first,
                store.rows_written,
                dst_slots=self.capacity,
                src_slots=int(saved["capacity"]),
            )
        self._sum.rebuild(leaves)
        self._min.rebuild(np.where(leaves > 0, leaves, np.inf))
        self.samples = int(state["samples"])
        self.max_priority = float(state["max_priority"])
