"""Sequence storage that keeps each sequence whole: a FIFO of rows of ``T`` steps each.

Every column of :data:`~border_py.sequences.STORED_SEQUENCE` is ``(capacity, T, ...)`` (the
learning steps' ``(capacity, L)``): a push copies rows, a sample reads rows, and a step shared by
overlapping sequences is stored in each of them (``T / period`` times). For small observations
(vectors) this is faster to push and to sample than the ring of steps
(:mod:`border_py.replay.sequence_store`, measured by ``benchmarks/sequence_replay_bench.py``) and
takes little more memory; the same interface, so that the buffers take either.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.replay.chunked import copy_ring
from border_py.replay.ring import RowRing
from border_py.sequences import STORED_SEQUENCE, Sequences

__all__ = ["WholeSequenceStore"]


class WholeSequenceStore(RowRing):
    """Sequences stored whole in a :class:`~border_py.replay.ring.RowRing` (its generator unused:
    the buffer draws), row ``r`` (the ``r``-th pushed) in slot ``r % capacity``.

    Args:
        capacity: rows (sequences) kept at most.
    """

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, None)
        self.burn_in: int | None = None

    @property
    def size(self) -> int:
        """Rows held: the newest ``size`` row numbers."""
        return self._size

    @property
    def next(self) -> int:
        """The slot of the next row."""
        return self._next

    @property
    def nbytes(self) -> int:
        """Bytes of the allocated rows."""
        return sum(a.nbytes for a in self._storage.values())

    def allocate(self, batch: Sequences) -> None:
        """Allocate the rows for sequences shaped as ``batch``'s."""
        self._allocate(batch.arrays())
        self.burn_in = batch.burn_in

    def push(self, batch: Sequences, key: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Store ``batch``'s newest ``capacity`` rows (``key`` is not needed: nothing is shared).

        Returns:
            The slots of the rows written (the newest last), and no slot of a row that left
            early (none does).
        """
        slots, _ = self._write(batch.arrays(), len(batch))
        return slots, np.empty(0, dtype=np.int64)

    def live(self, slots: np.ndarray) -> np.ndarray:
        """Which row slots hold a kept row."""
        return (np.asarray(slots) - (self.rows_written - self.size)) % self.capacity < self.size

    def gather(self, slots: np.ndarray) -> Sequences:
        """The sequences in row slots ``slots``."""
        assert self.burn_in is not None, "nothing was stored yet"
        return Sequences(
            **{k: self._storage[k][slots] for k in STORED_SEQUENCE}, burn_in=self.burn_in
        )

    def state(self) -> dict[str, Any]:
        """Counters and sizes as plain data."""
        return {
            "layout": "whole",
            "rows_written": self.rows_written,
            "size": self.size,
            "capacity": self.capacity,
            "burn_in": self.burn_in,
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The rows (named as :data:`~border_py.sequences.STORED_SEQUENCE`) as held: views, valid
        until the next push, of the slots in use."""
        filled = min(self.rows_written, self.capacity)
        return {k: v[:filled] for k, v in self._storage.items()}

    def load(self, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (into as many rows or more), chunk by chunk."""
        self.rows_written, self._size = int(state["rows_written"]), int(state["size"])
        self._next = self.rows_written % self.capacity
        self.burn_in = int(state["burn_in"])
        for name in STORED_SEQUENCE:
            saved = arrays[name]
            self._storage[name] = np.zeros((self.capacity, *saved.shape[1:]), saved.dtype)
            copy_ring(
                self._storage[name],
                saved,
                self.rows_written - self.size,
                self.rows_written,
                dst_slots=self.capacity,
                src_slots=int(state["capacity"]),
            )
