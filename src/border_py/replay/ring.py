"""A ring of preallocated rows, FIFO: what the transition buffer (:mod:`border_py.replay.uniform`)
and the sequence buffer's whole sequences (:mod:`border_py.replay.sequence_rows`) are stored in.

Storage is one array per column, ``capacity`` rows each, allocated on the first write from the
shapes and dtypes of that batch; a write past the last row wraps around to the first and
overwrites the oldest rows.
"""

from __future__ import annotations

import numpy as np

from border_py.replay.chunked import copy_ring

__all__ = ["RowRing", "copy_rows"]


class RowRing:
    """Rows in a ring, their position (``_next``, the row the next write starts at), the rows
    held (``len``), a count of the rows ever written, and the sampling generator.

    A buffer built on it validates ``capacity`` and ``seed`` (naming its keys) before calling
    this constructor.

    Args:
        capacity: rows kept at most.
        seed: seed of the sampling generator.
    """

    def __init__(self, capacity: int, seed: int | None) -> None:
        self.capacity = capacity
        self.rng = np.random.default_rng(seed)
        self._storage: dict[str, np.ndarray] = {}
        self._next = 0
        self._size = 0
        self.rows_written = 0  # rows written since the buffer was built (not checkpointed)

    def __len__(self) -> int:
        return self._size

    def _extra_nbytes(self) -> int:
        """Bytes a subclass holds besides the rows (priority trees)."""
        return 0

    @classmethod
    def _estimate_extra_nbytes(cls, capacity: int) -> int:
        return 0

    def _allocate(self, arrays: dict[str, np.ndarray]) -> None:
        """Allocate the rows, shaped and typed as ``arrays``' rows, unless they are."""
        if not self._storage:
            self._storage = {
                k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in arrays.items()
            }

    def _write(self, arrays: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, int]:
        """Write the ``n`` rows of ``arrays`` (the newest ``capacity`` of them if more) at the
        ring's position on; return the rows written and how many."""
        if n > self.capacity:  # only the newest `capacity` rows can survive
            arrays = {k: v[-self.capacity :] for k, v in arrays.items()}
            n = self.capacity
        idx = (self._next + np.arange(n)) % self.capacity
        for key, value in arrays.items():
            self._storage[key][idx] = value
        self._next = (self._next + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        self.rows_written += n
        return idx, n

    def overwritten(self, idx: np.ndarray, since: int) -> np.ndarray:
        """Which rows ``idx`` were written after :attr:`rows_written` was ``since``: the ring's
        rows from ``_next - written`` on, ``written = rows_written - since`` of them (a sample's
        rows whose priorities would land on another row's)."""
        written = self.rows_written - since
        if written >= self.capacity:
            return np.ones(np.shape(idx), dtype=bool)
        first = (self._next - written) % self.capacity
        return (np.asarray(idx) - first) % self.capacity < written

    def _draw(self, n: int) -> np.ndarray:
        return self.rng.integers(0, self._size, size=n)

    def continue_schedule(self, state: dict) -> None:
        """Continue the sampling of a checkpoint whose rows were not saved: its RNG (and,
        prioritized, beta's position and the largest priority seen)."""
        self.rng.bit_generator.state = state["rng"]

    def _restore(self, rows: dict[str, np.ndarray], size: int, next_row: int) -> None:
        """Rows from a snapshot of ``size`` rows, ``next_row`` its ring's position (see
        :func:`copy_rows`); the ring continues after them."""
        self._storage = {
            k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in rows.items()
        }
        for key, value in rows.items():
            copy_rows(self._storage[key], value, size, next_row, self.capacity)
        if size != self.capacity and next_row != size:  # a wrapped ring, unrolled: oldest first
            next_row = size
        self._size, self._next = size, next_row % self.capacity


def copy_rows(dst: np.ndarray, saved: np.ndarray, size: int, next_row: int, capacity: int) -> None:
    """Copy a snapshot's ``size`` rows (``next_row``: its ring's next row) into ``dst`` of
    ``capacity`` rows: in place with the same capacity or an unwrapped ring, else unrolled,
    oldest first (see :meth:`~border_py.replay.uniform.UniformReplayBuffer.load`)."""
    unroll = size != capacity and next_row != size
    if size:
        start = -next_row if unroll else 0
        copy_ring(dst, saved, 0, size, dst_slots=capacity, src_slots=size, src_base=start)
