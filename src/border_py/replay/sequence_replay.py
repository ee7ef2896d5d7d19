"""Sequence replay for recurrent agents (R2D2): sequences (:mod:`border_py.sequences`) stored
whole (:mod:`border_py.replay.sequence_rows`, the default) or as rows of slots into a ring of env
steps, each step stored once (:mod:`border_py.replay.sequence_store`, with
``steps_per_sequence``), sampled uniformly (by priority: :mod:`border_py.replay.sequence_prioritized`).

Observations keep their own dtype (uint8 pixels stay uint8); the ring of steps and the rows are
allocated in full on the first push, as the transition buffers allocate theirs
(:mod:`border_py.replay.uniform`). ``capacity`` counts sequences; the oldest leave first. The
buffers follow the transition buffers' protocol (:class:`~border_py.replay.base.ReplayBuffer`)
with :class:`~border_py.sequences.Sequences` for batches: ``push``, ``sample``, ``state`` /
``arrays`` / ``load`` for checkpoints, ``continue_schedule``, ``overwritten``, and for the
prioritized one ``update_priorities``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.config import non_negative, positive
from border_py.errors import ConfigError
from border_py.replay.sequence_rows import WholeSequenceStore
from border_py.replay.sequence_store import ROW_COLUMNS, STEP_COLUMNS, SequenceStore
from border_py.sequences import STORED_SEQUENCE, Sequences

__all__ = ["SequenceReplayBuffer", "saved_store"]

log = logging.getLogger(__name__)

SAVED = (
    *(f"step_{k}" for k in (*STEP_COLUMNS, "user")),
    *(f"row_{k}" for k in ("at", *ROW_COLUMNS)),
)  # the arrays of a checkpoint of a ring of steps
SAVED_WHOLE = STORED_SEQUENCE  # of sequences stored whole (the names main's first buffer wrote)


class SequenceReplayBuffer:
    """A fixed-capacity FIFO of sequences over a ring of steps, sampled uniformly with replacement.

    Args:
        capacity: sequences kept at most; the oldest leave first.
        seed: seed of the sampling generator.
        frame_stack: must be None (the ``replay_buffer`` group's shared key): sequences store
            their observations as they are.
        steps_per_sequence: null: each sequence stored whole (``T`` steps a row; the fastest to
            push and sample, for small observations). A number: the sequences' steps go to a
            ring of ``capacity * steps_per_sequence`` env steps; with keys (see :meth:`push`)
            each step is stored once and a sequence brings ``period`` new steps (``period + 1``
            at most on average over an episode): ``period + 1`` then holds ``capacity``
            sequences (pixel observations: about ``T / (period + 1)`` times less memory). A
            smaller ring holds fewer: the oldest leave when a step they use is overwritten.

    Raises:
        ConfigError: a bad capacity, seed or steps_per_sequence, or a ``frame_stack``.
    """

    needs_td_errors = False
    priority_from_actors = False

    def __init__(
        self,
        capacity: int,
        seed: int | None,
        frame_stack: int | None = None,
        steps_per_sequence: int | None = None,
    ) -> None:
        positive("capacity", capacity, int)
        if frame_stack is not None:
            raise ConfigError(
                f"replay_buffer.frame_stack={frame_stack}: sequence replay stores observations as"
                " they are (use null; stack frames with an env wrapper, or let the core remember)"
            )
        self.frame_stack: int | None = None
        if seed is not None:
            non_negative("seed", seed)
        if steps_per_sequence is not None:
            positive("steps_per_sequence", steps_per_sequence, int)
        self.capacity, self.steps_per_sequence = capacity, steps_per_sequence
        self.rng = np.random.default_rng(seed)
        self.store: SequenceStore | WholeSequenceStore | None = None  # made by the first push
        self._shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
        self._warned = False  # that rows leave early (a ring too small for them)

    def __len__(self) -> int:
        return 0 if self.store is None else self.store.size

    @property
    def burn_in(self) -> int | None:
        """The stored sequences' ``B`` (None before the first)."""
        return None if self.store is None else self.store.burn_in

    @property
    def rows_written(self) -> int:
        """Rows :meth:`push` wrote so far (a checkpoint's included)."""
        return 0 if self.store is None else self.store.rows_written

    @property
    def nbytes(self) -> int:
        """Bytes of the allocated storage (steps, rows and priority trees)."""
        return (0 if self.store is None else self.store.nbytes) + self._extra_nbytes()

    def _extra_nbytes(self) -> int:
        return 0

    @classmethod
    def estimate_nbytes(
        cls,
        capacity: int,
        observation_space: gym.Space,
        steps: int,
        length: int,
        state_shape: tuple[int, ...],
        steps_per_sequence: int | None = None,
    ) -> int | None:
        """The :attr:`nbytes` of a full buffer of sequences of ``steps`` stored steps, ``length``
        learning steps and a recurrent state of ``state_shape``, worked out before it is built;
        None for an observation space without a shape and dtype.

        Sequences stored whole, per stored step of a row: the observation, an int64 action, a
        float32 reward and a bool. With a ring, per env step of it (``capacity *
        steps_per_sequence``, plus a zero one): the observation, an int64 action, a float32
        reward and an int64 user; per row an int32 ring slot per stored step (int64 for a ring
        of 2**31 steps or more). Per row either way: float32 ``ret`` and ``discount``, an int64
        ``offset`` and a bool per learning step, the float32 state, int64 ``burn`` and
        ``first_prev_action``, float32 ``first_prev_reward``.
        """
        obs = observation_space
        if obs.shape is None or obs.dtype is None:
            return None
        step = math.prod(obs.shape) * np.dtype(obs.dtype).itemsize + 8 + 4
        row = length * (4 + 4 + 8 + 1) + 4 * math.prod(state_shape) + 8 + 8 + 4
        if steps_per_sequence is None:
            total = capacity * (row + steps * (step + 1))
        else:
            ring = capacity * steps_per_sequence
            index = 4 if ring < 2**31 - 1 else 8
            total = (ring + 1) * step + ring * 8 + capacity * (row + steps * index)
        return total + cls._estimate_extra_nbytes(capacity)

    @classmethod
    def _estimate_extra_nbytes(cls, capacity: int) -> int:
        return 0

    def check_observations(self, observation_space: gym.Space) -> None:
        """Nothing to refuse: sequences store observation arrays as they are."""

    def _new_store(self) -> SequenceStore | WholeSequenceStore:
        if self.steps_per_sequence is None:
            return WholeSequenceStore(self.capacity)
        return SequenceStore(self.capacity, self.capacity * self.steps_per_sequence)

    def push(self, batch: Sequences, key: np.ndarray | None = None) -> None:
        """Append a batch (copied), the oldest sequences leaving when full.

        Args:
            batch: the sequences.
            key: int64 ``(rows, 3)``: each sequence's ``(stream, episode, start)``
                (:mod:`border_py.replay.sequence_store`): with a ring of steps, the steps it
                shares with the previous sequence of its stream's episode are not stored again.
                None: the batch's own (:attr:`~border_py.sequences.Sequences.key`, what actors
                cut); none there either: nothing shared.

        Raises:
            ValueError: the batch's sequences are not shaped as the stored ones (burn-in, steps,
                observation shape or dtype), or keys not one triple per sequence.
        """
        key = batch.key if key is None else key
        if key is not None:
            key = np.asarray(key, dtype=np.int64)
            if key.shape != (len(batch), 3):
                raise ValueError(f"sequence keys of shape {key.shape}, expected {(len(batch), 3)}")
        if self.store is None:
            self.store = self._new_store()
            self.store.allocate(batch)
            self._remember_shapes(batch)
        self._check_shapes(batch)
        slots, evicted = self.store.push(batch, key)
        self._on_push(slots, batch, len(slots))
        self._on_evict(evicted)
        if len(evicted) and not self._warned:
            self._warned = True
            log.warning(
                "replay_buffer.steps_per_sequence=%s: the ring of steps overwrote steps of held"
                " sequences, which left early: it holds %d of capacity=%d (sequences without"
                " keys share no step: each takes up to %d)",
                self.steps_per_sequence,
                len(self),
                self.capacity,
                batch.steps,
            )

    def _check_shapes(self, batch: Sequences) -> None:
        for key, value in batch.arrays().items():
            shape, dtype = self._shapes[key]
            if value.shape[1:] != shape or value.dtype != dtype:
                raise ValueError(
                    f"sequence replay: {key} of shape {value.shape[1:]} ({value.dtype}) per"
                    f" sequence, the stored ones are {shape} ({dtype})"
                )
        if batch.burn_in != self.burn_in:
            raise ValueError(f"sequence replay: burn_in {batch.burn_in}, stored {self.burn_in}")

    def _on_push(self, idx: np.ndarray, batch: Sequences, n: int) -> None:
        """Hook: rows ``idx`` now hold the last ``n`` sequences of ``batch``."""

    def _on_evict(self, idx: np.ndarray) -> None:
        """Hook: rows ``idx`` left early (a step they use was overwritten)."""

    def overwritten(self, idx: np.ndarray, since: int) -> np.ndarray:
        """Which rows ``idx`` :meth:`push` wrote after :attr:`rows_written` was ``since``, or
        that left since (see
        :meth:`~border_py.replay.uniform.UniformReplayBuffer.overwritten`)."""
        written = self.rows_written - since
        if written >= self.capacity or self.store is None:
            return np.ones(np.shape(idx), dtype=bool)
        first = (self.store.next - written) % self.capacity
        return ((np.asarray(idx) - first) % self.capacity < written) | ~self.store.live(idx)

    def _draw(self, n: int) -> np.ndarray:
        assert self.store is not None
        drawn = self.rng.integers(0, self.store.size, size=n)
        if self.store.size == self.capacity:
            return drawn
        return (self.store.rows_written - self.store.size + drawn) % self.capacity

    def _drawn(self, n: int) -> tuple[np.ndarray, Sequences]:
        """``n`` rows drawn (:meth:`_draw`) and their sequences."""
        if self.store is None or self.store.size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = self._draw(n)
        return idx, self.store.gather(idx)

    def sample(self, batch_size: int) -> Sequences:
        """``batch_size`` sequences drawn uniformly with replacement."""
        return self._drawn(batch_size)[1]

    def state(self) -> dict[str, Any]:
        """Position, size, the store's counters and streams, and the sampling-RNG state (plain
        data)."""
        store = None if self.store is None else self.store.state()
        return {
            "next": 0 if self.store is None else self.store.next,
            "size": len(self),
            "store": store,
            "rng": self.rng.bit_generator.state,
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored steps and rows (:meth:`SequenceStore.arrays`): views of the storage, valid
        until the next push."""
        return {} if self.store is None else self.store.arrays()

    def continue_schedule(self, state: dict) -> None:
        """Continue the sampling of a checkpoint whose sequences were not saved: its RNG."""
        self.rng.bit_generator.state = state["rng"]

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (memory-mapped files too: copied in chunks).

        With the same capacity the rows keep their places (an exact resume); with a larger one
        the kept rows are put in time order, oldest first, and new sequences follow them.

        Raises:
            ConfigError: the checkpoint holds more sequences than ``capacity``, steps its held
                sequences use that the ring cannot keep, or no sequences (another buffer's
                rows).
        """
        size, saved = int(state["size"]), saved_store(state, arrays)
        if size > self.capacity:
            raise ConfigError(
                f"replay_buffer.capacity={self.capacity}: must be >= {size}, the sequences the"
                " checkpoint's replay buffer holds"
            )
        whole = self.steps_per_sequence is None
        if arrays and (set(arrays) not in (set(SAVED), set(SAVED_WHOLE)) or saved is None):
            raise ConfigError(
                f"replay_buffer: the checkpoint's replay buffer holds {sorted(arrays)}, not the"
                f" steps and rows of sequences {sorted(SAVED_WHOLE if whole else SAVED)} (was it"
                " saved by another buffer?)"
            )
        if arrays and whole != (set(arrays) == set(SAVED_WHOLE)):
            raise ConfigError(
                f"replay_buffer.steps_per_sequence={'null' if whole else self.steps_per_sequence}:"
                " the checkpoint's"
                f" sequences are stored {'in a ring of steps' if whole else 'whole'}; resume with"
                f" {'its steps_per_sequence' if whole else 'null'}"
            )
        self.store, self._shapes = None, {}
        self.rng.bit_generator.state = state["rng"]
        if not arrays or saved is None:
            return
        store = self._new_store()
        if isinstance(store, WholeSequenceStore):
            store.load(saved, arrays)
        else:
            # every step the checkpoint's ring held when they fit (sharing goes on exactly),
            # else those its held sequences use
            first = int(saved["floor"])
            if int(saved["written"]) - first > store.ring:
                first = store.needed(saved, arrays)
            if int(saved["written"]) - first > store.ring:
                raise ConfigError(
                    f"replay_buffer.steps_per_sequence={self.steps_per_sequence}: a ring of"
                    f" {store.ring} steps, the checkpoint's sequences use"
                    f" {int(saved['written']) - first}; raise it (or the capacity)"
                )
            store.load(saved, arrays, first)
        self.store = store
        self._remember_shapes(store.gather(np.zeros(1, np.int64)))

    def _remember_shapes(self, batch: Sequences) -> None:
        """Push only sequences shaped as ``batch``'s from now on."""
        self._shapes = {k: (v.shape[1:], v.dtype) for k, v in batch.arrays().items()}


def saved_store(state: dict[str, Any], arrays: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """The store's part of a checkpoint's :meth:`SequenceReplayBuffer.state` (None: no store).

    A checkpoint of the first sequence buffer (whole rows in a ring, before the ring of steps)
    has none: its ``size`` rows (``arrays``, named as the whole rows' are) are the slots of a ring
    of ``size`` rows whose oldest is at ``next % size``; they are numbered so, which keeps each in
    its slot (an exact resume at the same capacity).
    """
    if "store" in state or not arrays:
        return state.get("store")
    size = int(state["size"])
    return {
        "layout": "whole",
        "rows_written": size + int(state["next"]) % max(size, 1),
        "size": size,
        "capacity": size,
        "burn_in": state.get("burn_in"),
    }
