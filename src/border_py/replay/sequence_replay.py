"""Sequence replay for recurrent agents (R2D2): whole sequences (:mod:`border_py.sequences`) in a
ring of preallocated rows, sampled uniformly (by priority:
:mod:`border_py.replay.sequence_prioritized`).

A row is one sequence, its columns those of :data:`~border_py.sequences.STORED_SEQUENCE`:
``obs`` is ``(capacity, T, *obs_shape)`` in the observations' own dtype (uint8 pixels stay
uint8), allocated in full on the first push, as the transition buffers allocate theirs
(:mod:`border_py.replay.uniform`). ``capacity`` counts sequences; the oldest is overwritten first.
The buffers follow the transition buffers' protocol (:class:`~border_py.replay.base.ReplayBuffer`)
with :class:`~border_py.sequences.Sequences` for batches: ``push``, ``sample``, ``state`` /
``arrays`` / ``load`` for checkpoints, ``continue_schedule``, ``overwritten``, and for the
prioritized one ``update_priorities``.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.config import non_negative, positive
from border_py.errors import ConfigError
from border_py.replay.ring import RowRing
from border_py.sequences import STORED_SEQUENCE, Sequences

__all__ = ["SequenceReplayBuffer"]


class SequenceReplayBuffer(RowRing):
    """A fixed-capacity ring of sequences, sampled uniformly with replacement.

    Args:
        capacity: sequences kept at most; the oldest are overwritten.
        seed: seed of the sampling generator.
        frame_stack: must be None (the ``replay_buffer`` group's shared key): sequences store
            their observations as they are.

    Raises:
        ConfigError: a bad capacity or seed, or a ``frame_stack``.
    """

    needs_td_errors = False
    priority_from_actors = False

    def __init__(self, capacity: int, seed: int | None, frame_stack: int | None = None) -> None:
        positive("capacity", capacity, int)
        if frame_stack is not None:
            raise ConfigError(
                f"replay_buffer.frame_stack={frame_stack}: sequence replay stores observations as"
                " they are (use null; stack frames with an env wrapper, or let the core remember)"
            )
        self.frame_stack: int | None = None
        if seed is not None:
            non_negative("seed", seed)
        super().__init__(capacity, seed)
        self.burn_in: int | None = None  # the stored sequences' B (with the shapes of the rows)

    @property
    def nbytes(self) -> int:
        """Bytes of the allocated storage (rows and priority trees)."""
        return sum(a.nbytes for a in self._storage.values()) + self._extra_nbytes()

    @classmethod
    def estimate_nbytes(
        cls,
        capacity: int,
        observation_space: gym.Space,
        steps: int,
        length: int,
        state_shape: tuple[int, ...],
    ) -> int | None:
        """The :attr:`nbytes` of a full buffer of sequences of ``steps`` stored steps, ``length``
        learning steps and a recurrent state of ``state_shape``, worked out before it is built;
        None for an observation space without a shape and dtype.

        Per stored step: the observation, an int64 action, a float32 reward and a bool; per
        learning step: float32 ``ret`` and ``discount``, an int64 ``offset`` and a bool; per row:
        the float32 state, int64 ``burn`` and ``first_prev_action``, float32
        ``first_prev_reward``.
        """
        obs = observation_space
        if obs.shape is None or obs.dtype is None:
            return None
        per_step = math.prod(obs.shape) * np.dtype(obs.dtype).itemsize + 8 + 4 + 1
        row = steps * per_step + length * (4 + 4 + 8 + 1) + 4 * math.prod(state_shape) + 8 + 8 + 4
        return capacity * row + cls._estimate_extra_nbytes(capacity)

    def check_observations(self, observation_space: gym.Space) -> None:
        """Nothing to refuse: sequences store observation arrays as they are."""

    def push(self, batch: Sequences) -> None:
        """Append a batch (copied), overwriting the oldest sequences when full.

        Raises:
            ValueError: the batch's sequences are not shaped as the stored ones (burn-in, steps,
                observation shape or dtype).
        """
        arrays = batch.arrays()
        if not self._storage:
            self.burn_in = batch.burn_in
        self._allocate(arrays)
        self._check_shapes(batch)
        idx, n = self._write(arrays, len(batch))
        self._on_push(idx, batch, n)

    def _check_shapes(self, batch: Sequences) -> None:
        for key, value in batch.arrays().items():
            stored = self._storage[key]
            if value.shape[1:] != stored.shape[1:] or value.dtype != stored.dtype:
                raise ValueError(
                    f"sequence replay: {key} of shape {value.shape[1:]} ({value.dtype}) per"
                    f" sequence, the stored ones are {stored.shape[1:]} ({stored.dtype})"
                )
        if batch.burn_in != self.burn_in:
            raise ValueError(f"sequence replay: burn_in {batch.burn_in}, stored {self.burn_in}")

    def _on_push(self, idx: np.ndarray, batch: Sequences, n: int) -> None:
        """Hook: rows ``idx`` now hold the last ``n`` sequences of ``batch``."""

    def _drawn(self, n: int) -> tuple[np.ndarray, Sequences]:
        """``n`` rows drawn (:meth:`_draw`) and their sequences."""
        if self._size == 0 or self.burn_in is None:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = self._draw(n)
        columns = {k: self._storage[k][idx] for k in STORED_SEQUENCE}
        return idx, Sequences(**columns, burn_in=self.burn_in)

    def sample(self, batch_size: int) -> Sequences:
        """``batch_size`` sequences drawn uniformly with replacement."""
        return self._drawn(batch_size)[1]

    def state(self) -> dict[str, Any]:
        """Position, size, burn-in and sampling-RNG state (plain data)."""
        return {
            "next": self._next,
            "size": self._size,
            "burn_in": self.burn_in,
            "rng": self.rng.bit_generator.state,
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored sequences (only the filled rows): views of the storage, valid until the
        next push."""
        return {k: v[: self._size] for k, v in self._storage.items()}

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (memory-mapped files too: copied in chunks).

        With the same capacity the rows keep their places (an exact resume); with a larger one
        they are put in time order, oldest first, and new sequences follow them.

        Raises:
            ConfigError: the checkpoint holds more sequences than ``capacity``, or no sequences
                (another buffer's rows).
        """
        size, next_row = int(state["size"]), int(state["next"])
        if size > self.capacity:
            raise ConfigError(
                f"replay_buffer.capacity={self.capacity}: must be >= {size}, the sequences the"
                " checkpoint's replay buffer holds"
            )
        if arrays and set(arrays) != set(STORED_SEQUENCE):
            raise ConfigError(
                f"replay_buffer: the checkpoint's replay buffer holds {sorted(arrays)}, not the"
                f" columns of sequences {sorted(STORED_SEQUENCE)} (was it saved by another buffer?)"
            )
        self._restore(arrays, size, next_row)
        burn_in = state.get("burn_in")
        self.burn_in = None if burn_in is None else int(burn_in)
        self.rng.bit_generator.state = state["rng"]
