"""Uniform experience replay over preallocated numpy arrays (a ring buffer, FIFO eviction)."""

from __future__ import annotations

import numpy as np

from border_py.config import ConfigError, positive
from border_py.transitions import Transitions


class UniformReplayBuffer:
    """A fixed-capacity ring buffer of transitions, sampled uniformly with replacement.

    Storage is allocated on the first push, from the shapes and dtypes of that batch.

    Args:
        capacity: maximum number of transitions kept; the oldest are overwritten.
        seed: seed of the sampling generator.
    """

    def __init__(self, capacity: int, seed: int) -> None:
        positive("capacity", capacity, int)
        self.capacity = capacity
        self.rng = np.random.default_rng(seed)
        self._storage: dict[str, np.ndarray] = {}
        self._next = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def push(self, batch: Transitions) -> None:
        """Append a batch, overwriting the oldest transitions when full."""
        arrays = batch.arrays()
        if not self._storage:
            self._storage = {
                k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in arrays.items()
            }
        n = len(batch)
        if n > self.capacity:  # only the newest `capacity` transitions can survive
            arrays = {k: v[-self.capacity :] for k, v in arrays.items()}
            n = self.capacity
        idx = (self._next + np.arange(n)) % self.capacity
        for key, value in arrays.items():
            self._storage[key][idx] = value
        self._next = (self._next + n) % self.capacity
        self._size = min(self._size + n, self.capacity)

    def state(self) -> dict[str, int | dict]:
        """Position, size and sampling-RNG state (plain data)."""
        return {"next": self._next, "size": self._size, "rng": self.rng.bit_generator.state}

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored transitions (only the filled rows), for a compact snapshot."""
        return {k: v[: self._size] for k, v in self._storage.items()}

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays`.

        With the same capacity the rows keep their places (an exact resume); with a larger one
        they are put in time order, oldest first, and new transitions follow them.
        """
        size, next_row = int(state["size"]), int(state["next"])
        if size > self.capacity:
            raise ConfigError(
                f"replay_buffer.capacity={self.capacity}: must be >= {size}, the transitions the"
                " checkpoint's replay buffer holds"
            )
        if size != self.capacity and next_row != size:  # a wrapped ring: unroll it, oldest first
            arrays = {k: np.roll(v, -next_row, axis=0) for k, v in arrays.items()}
            next_row = size
        self._storage = {
            k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in arrays.items()
        }
        for key, value in arrays.items():
            self._storage[key][:size] = value
        self._size, self._next = size, next_row % self.capacity
        self.rng.bit_generator.state = state["rng"]

    def sample(self, batch_size: int) -> Transitions:
        """``batch_size`` transitions drawn uniformly with replacement."""
        if self._size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = self.rng.integers(0, self._size, size=batch_size)
        return Transitions(**{k: v[idx] for k, v in self._storage.items()})
