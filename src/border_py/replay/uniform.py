"""Uniform experience replay over preallocated numpy arrays (a ring buffer, FIFO eviction).

It can store stacked pixel observations frame by frame (``frame_stack``, see
:mod:`border_py.replay.frames`); :mod:`border_py.replay.prioritized` builds on it.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.config import non_negative, positive, require
from border_py.errors import ConfigError
from border_py.replay.frames import FrameStore
from border_py.replay.ring import RowRing
from border_py.transitions import STORED, Transitions

__all__ = ["UniformReplayBuffer"]

MAX_REDRAWS = 100  # rounds of redrawing rows whose frames are gone before giving up


class UniformReplayBuffer(RowRing):
    """A fixed-capacity ring buffer of transitions, sampled uniformly with replacement.

    Storage is allocated on the first push, from the shapes and dtypes of that batch.

    Args:
        capacity: maximum number of transitions kept; the oldest are overwritten.
        seed: seed of the sampling generator.
        frame_stack: null: store observations as they are; ``k``: observations are stacks of
            ``k`` uint8 frames (gymnasium's ``FrameStackObservation``), stored one frame per env
            step in a ring of ``capacity + capacity // 32 + 1`` frames and rebuilt when sampled.
            A transition whose frames that ring has overwritten is never sampled; the margin
            covers the extra reset frames of episodes of 32 steps or more, so with shorter
            episodes (or frames still in flight from many envs) a few of the oldest
            transitions become unsampleable before they are evicted.
    """

    def __init__(self, capacity: int, seed: int | None, frame_stack: int | None = None) -> None:
        positive("capacity", capacity, int)
        if seed is not None:
            non_negative("seed", seed)
        require(
            "frame_stack",
            frame_stack is None or (isinstance(frame_stack, int) and frame_stack >= 1),
            "null or a positive int",
            frame_stack,
        )
        super().__init__(capacity, seed)
        self.frame_stack = frame_stack
        self._frames = FrameStore(_frame_capacity(capacity), frame_stack) if frame_stack else None

    @property
    def nbytes(self) -> int:
        """Bytes of the allocated storage (rows, frames, priority trees)."""
        arrays = [*self._storage.values()]
        if self._frames is not None and self._frames.pixels is not None:
            arrays += [self._frames.pixels, self._frames.prev]
        return sum(a.nbytes for a in arrays) + self._extra_nbytes()

    @classmethod
    def estimate_nbytes(
        cls,
        capacity: int,
        observation_space: gym.Space,
        action_space: gym.Space,
        frame_stack: int | None = None,
    ) -> int | None:
        """The :attr:`nbytes` of a full buffer of these keys and spaces, worked out before it is
        built (nothing is allocated); None for spaces without a shape and dtype.

        Rows hold ``obs`` and ``next_obs`` (with ``frame_stack``: a frame id each, plus the id of
        their oldest frame), the action (int64 for discrete spaces), a float32 reward and a
        float32 discount; with ``frame_stack`` the frame ring adds one ``H x W`` uint8 frame and
        one int64 link per frame.
        """
        obs, act = observation_space, action_space
        if obs.shape is None or obs.dtype is None or act.shape is None or act.dtype is None:
            return None
        discrete = isinstance(act, (gym.spaces.Discrete, gym.spaces.MultiDiscrete))
        action = math.prod(act.shape) * (8 if discrete else np.dtype(act.dtype).itemsize)
        if frame_stack:
            row = 3 * 8 + action + 4 + 4
            frames = _frame_capacity(capacity)
            ring = (frames + 1) * math.prod(obs.shape[1:]) + frames * 8
        else:
            row = 2 * math.prod(obs.shape) * np.dtype(obs.dtype).itemsize + action + 4 + 4
            ring = 0
        return capacity * row + ring + cls._estimate_extra_nbytes(capacity)

    needs_td_errors = False
    priority_from_actors = False

    def check_observations(self, observation_space: gym.Space) -> None:
        """Fail with one :class:`ConfigError` line if this buffer cannot store these observations
        (called before anything starts)."""
        if self.frame_stack is None:
            return
        shape = observation_space.shape or ()
        ok = (
            observation_space.dtype == np.uint8 and len(shape) == 3 and shape[0] == self.frame_stack
        )
        require(
            "replay_buffer.frame_stack",
            ok,
            f"null for observations {observation_space} (frame storage needs uint8 stacks of"
            f" shape ({self.frame_stack}, H, W))",
            self.frame_stack,
        )

    def push(self, batch: Transitions) -> None:
        """Append a batch, overwriting the oldest transitions when full."""
        arrays = self._columns(batch)
        self._allocate(arrays)
        idx, n = self._write(arrays, len(batch))
        self._on_push(idx, batch, n)

    def _columns(self, batch: Transitions) -> dict[str, np.ndarray]:
        """The columns to store for ``batch`` (frame references translated to global ids)."""
        frames = self._frames
        if (frames is None) != (batch.frames is None):
            raise ValueError(
                f"replay_buffer.frame_stack={self.frame_stack}: got a batch "
                f"{'without' if frames is not None else 'with'} frame references"
            )
        if frames is None or batch.frames is None:
            return batch.arrays()
        chunk = batch.frames
        frames.add(chunk)
        obs = frames.translate(chunk.source, batch.obs)
        next_obs = frames.translate(chunk.source, batch.next_obs)
        # the older of the two stacks' oldest frames (MISSING, below every id, wins)
        oldest = np.minimum(frames.oldest(obs), frames.oldest(next_obs))
        return batch.arrays() | {"obs": obs, "next_obs": next_obs, "oldest": oldest}

    def _on_push(self, idx: np.ndarray, batch: Transitions, n: int) -> None:
        """Hook: rows ``idx`` now hold the last ``n`` transitions of ``batch``."""

    def _live(self, idx: np.ndarray) -> np.ndarray:
        """Which rows ``idx`` can be sampled."""
        return self._frames_held(idx)

    def _frames_held(self, idx: np.ndarray) -> np.ndarray:
        """Which rows ``idx`` still have every frame of their stacks (all, without frame storage)."""
        if self._frames is None:
            return np.ones(len(idx), dtype=bool)
        return self._frames.live(self._storage["oldest"][idx])

    def _redraw(self, n: int) -> np.ndarray:
        return self._draw(n)

    def _forget(self, idx: np.ndarray) -> None:
        """Hook: rows ``idx`` turned out unusable (their frames are gone)."""

    def _draw_usable(self, n: int) -> np.ndarray:
        """``n`` rows from :meth:`_draw`, unusable ones replaced by fresh :meth:`_redraw` draws."""
        if self._size == 0:
            raise RuntimeError("cannot sample from an empty replay buffer")
        idx = self._draw(n)
        for _ in range(MAX_REDRAWS):
            bad = ~self._live(idx)
            if not bad.any():
                return idx
            self._forget(idx[bad])
            idx[bad] = self._redraw(int(bad.sum()))
        raise RuntimeError(
            "replay buffer: no transition has all its frames left (episodes far shorter than 32"
            " steps fill the frame ring faster than the transition ring)"
        )

    def _gather(self, idx: np.ndarray) -> Transitions:
        """The transitions in rows ``idx`` (stacks rebuilt from frames with frame storage)."""
        columns = {k: self._storage[k][idx] for k in STORED}
        if self._frames is not None:
            columns["obs"] = self._frames.stacks(columns["obs"])
            columns["next_obs"] = self._frames.stacks(columns["next_obs"])
        return Transitions(**columns)

    def sample(self, batch_size: int) -> Transitions:
        """``batch_size`` transitions drawn uniformly with replacement."""
        return self._gather(self._draw_usable(batch_size))

    def state(self) -> dict[str, Any]:
        """Position, size and sampling-RNG state (plain data)."""
        state: dict[str, Any] = {
            "next": self._next,
            "size": self._size,
            "rng": self.rng.bit_generator.state,
        }
        if self._frames is not None:
            state["frames"] = self._frames.state()
        return state

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored transitions (only the filled rows) for a snapshot: views of the storage,
        valid until the next push."""
        arrays = {k: v[: self._size] for k, v in self._storage.items()}
        if self._frames is not None:
            arrays |= self._frames.arrays()
        return arrays

    def load(self, state: dict, arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (which may be memory-mapped files: they are
        copied in chunks, see :mod:`border_py.replay.chunked`).

        With the same capacity the rows keep their places (an exact resume); with a larger one
        they are put in time order, oldest first, and new transitions follow them.
        """
        size, next_row = int(state["size"]), int(state["next"])
        if size > self.capacity:
            raise ConfigError(
                f"replay_buffer.capacity={self.capacity}: must be >= {size}, the transitions the"
                " checkpoint's replay buffer holds"
            )
        if ("frames" in state) != (self._frames is not None):
            raise ConfigError(
                f"replay_buffer.frame_stack={self.frame_stack}: cannot change on resume"
            )
        rows = {k: v for k, v in arrays.items() if not k.startswith("frame_")}
        if self._frames is not None:
            self._frames.load(state["frames"], arrays)
        self._restore(rows, size, next_row)
        self.rng.bit_generator.state = state["rng"]


def _frame_capacity(capacity: int) -> int:
    """Frames the ring of a buffer of ``capacity`` transitions keeps (see the class docstring)."""
    return capacity + capacity // 32 + 1
