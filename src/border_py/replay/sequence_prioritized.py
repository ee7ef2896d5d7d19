"""Prioritized sequence replay (R2D2): the sequence ring of :mod:`border_py.replay.sequence_replay`
sampled by priority, as :mod:`border_py.replay.prioritized` samples transitions."""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.errors import ConfigError
from border_py.replay.chunked import copy_ring
from border_py.replay.prioritization import Prioritization
from border_py.replay.sequence_replay import SequenceReplayBuffer, saved_store
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
    priority seen so far (1 at first), or with ``priority_from_actors`` the actor's. A row that
    leaves early (its steps overwritten in the ring of steps) gets priority 0: never drawn.

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
        self.prioritization = Prioritization(
            capacity, alpha, beta_start, beta_steps, eps, priority_from_actors
        )
        self.priority_from_actors = priority_from_actors

    def _extra_nbytes(self) -> int:
        return self.prioritization.nbytes

    @classmethod
    def _estimate_extra_nbytes(cls, capacity: int) -> int:
        return Prioritization.estimate_nbytes(capacity)

    @property
    def beta(self) -> float:
        """The importance-sampling exponent of the next sample."""
        return self.prioritization.beta

    def _filled(self) -> int:
        """Rows ever written (the slots in use)."""
        return min(self.rows_written, self.capacity)

    def priorities(self) -> np.ndarray:
        """The priorities ``p_i`` (after the exponent) of the slots in use (0: a row that left)."""
        return self.prioritization.leaves(self._filled()).copy()

    def push(self, batch: Sequences, key: np.ndarray | None = None) -> None:
        """Append a batch (see the uniform buffer; ``key``: its sequences' keys) with its actor's
        priorities, if it has them.

        Raises:
            RunError: a non-finite priority from an actor; the buffer is left as it was.
        """
        self.prioritization.check_pushed(batch.priority)
        super().push(batch, key)

    def _on_push(self, idx: np.ndarray, batch: Sequences, n: int) -> None:
        self.prioritization.set(idx, self.prioritization.pushed(n, batch.priority))

    def _on_evict(self, idx: np.ndarray) -> None:
        self.prioritization.set(idx, np.zeros(len(idx)))

    def _draw(self, n: int) -> np.ndarray:
        return self.prioritization.draw(self.rng, n)

    def sample(self, batch_size: int) -> Sequences:
        """``batch_size`` sequences drawn by priority, with ``weight`` and ``index`` set."""
        idx, batch = self._drawn(batch_size)
        batch.weight = self.prioritization.weigh(idx)
        batch.index = idx
        return batch

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """Set the sampled rows' priorities from their sequence priorities (``td_error``, one per
        sequence); rows that left since they were sampled stay out.

        Raises:
            RunError: a non-finite priority (the agent diverged); no priority is changed.
        """
        p = self.prioritization.updated(index, td_error)
        index = np.asarray(index)
        if self.store is not None:
            live = self.store.live(index)
            index, p = index[live], p[live]
        self.prioritization.set(index, p)

    def state(self) -> dict[str, Any]:
        """The uniform buffer's state plus the beta position and the largest priority."""
        return super().state() | self.prioritization.state()

    def arrays(self) -> dict[str, np.ndarray]:
        """The steps and rows plus the rows' priorities (``priority``), views as well."""
        arrays = super().arrays()
        if arrays:
            arrays["priority"] = self.prioritization.leaves(self._filled())
        return arrays

    def continue_schedule(self, state: dict) -> None:
        """Also continue beta's annealing and the largest priority seen."""
        super().continue_schedule(state)
        self.prioritization.continue_schedule(state)

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
        saved = saved_store(state, arrays)
        if self.store is not None and priority is not None and saved is not None:
            store = self.store
            copy_ring(
                leaves,
                priority,
                store.rows_written - store.size,
                store.rows_written,
                dst_slots=self.capacity,
                src_slots=int(saved["capacity"]),
            )
        self.prioritization.restore(leaves, state)
