"""Actor side of frame storage: each new frame of stacked observations registered and sent once.

See :mod:`border_py.replay.frames` for the learner side and the scheme as a whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.transitions import ZERO, FrameChunk

__all__ = ["FrameEncoder"]


class FrameEncoder:
    """Actor side: registers the newest frame of every stacked observation of a vector env.

    It checks, step by step, that the observations really are frame stacks (the older ``k - 1``
    frames of ``next_obs`` are the newer ``k - 1`` of ``obs``; a reset stack is padded with its
    own frame or zeros), so a mismatched env fails loudly instead of training on wrong stacks.

    Args:
        source: the id of this stream of frames (unique per sampler).
        n_envs: envs stepped together.
        n_step: the n-step window of the transitions (how far back they reference frames).
        first_obs: the envs' first stacked observations, uint8 ``(n_envs, k, H, W)``.
        first_id: the first local id (a resumed stream whose envs start afresh goes on after
            the ids it had used).
    """

    def __init__(
        self, source: int, n_envs: int, n_step: int, first_obs: np.ndarray, first_id: int = 0
    ) -> None:
        self.source = source
        # An env step adds at most 2 frames per env (next frame, reset frame). A later transition
        # references the obs of a pending n-step window (registered at most n_step steps ago) or
        # links to an env's current frame: never more than this many local ids back.
        self.horizon = 2 * n_envs * (n_step + 1)
        self.next_id = first_id
        self._first = first_id  # local id of the first frame not yet taken
        self._keep_from = first_id  # no transition emitted from now on uses a frame below this
        self._pixels: list[np.ndarray] = []
        self._prev: list[np.ndarray] = []
        self.ids = self._resets(first_obs)

    def _add(self, pixels: np.ndarray, prev: np.ndarray) -> np.ndarray:
        ids = self.next_id + np.arange(len(pixels), dtype=np.int64)
        self.next_id += len(pixels)
        self._pixels.append(pixels)
        self._prev.append(prev)
        return ids

    def _resets(self, stacks: np.ndarray) -> np.ndarray:
        """Register the reset frames of ``stacks`` (first observations of new episodes)."""
        newest, below = stacks[:, -1:], stacks[:, :-1]
        self_padded = (below == newest).all(axis=(1, 2, 3))
        zero_padded = (below == 0).all(axis=(1, 2, 3))
        if not (self_padded | zero_padded).all():
            raise ValueError(
                "replay_buffer.frame_stack: a first observation is not a frame stack padded with its"
                " reset frame or zeros (gymnasium's FrameStackObservation padding 'reset' or 'zero')"
            )
        ids = self.next_id + np.arange(len(stacks), dtype=np.int64)
        return self._add(stacks[:, -1].copy(), np.where(self_padded, ids, ZERO))

    def observe(
        self, obs: np.ndarray, next_obs: np.ndarray, done: np.ndarray, reset_obs: np.ndarray
    ) -> np.ndarray:
        """Register one env step: ``obs`` acted on, ``next_obs`` reached (final observations of
        ended episodes), ``done`` per env, ``reset_obs`` the first observations of the next
        episodes (read where ``done``). Returns the ids of the newest frames of ``next_obs``."""
        if not np.array_equal(next_obs[:, :-1], obs[:, 1:]):
            raise ValueError(
                "replay_buffer.frame_stack: consecutive observations are not frame stacks (the"
                " older frames of the next observation differ from the newer frames of this one)"
            )
        next_ids = self._add(next_obs[:, -1].copy(), self.ids)
        current = next_ids.copy()
        if done.any():
            ended = np.flatnonzero(done)
            current[ended] = self._resets(reset_obs[ended])
        self.ids = current
        return next_ids

    def take(self, like: np.ndarray) -> FrameChunk:
        """The frames registered since the last call (``like``: a stack, for the empty case)."""
        if self._pixels:
            pixels, prev = np.concatenate(self._pixels), np.concatenate(self._prev)
        else:
            pixels = np.empty((0, *like.shape[-2:]), like.dtype)
            prev = np.empty(0, np.int64)
        chunk = FrameChunk(self.source, self._first, pixels, prev, self._keep_from)
        self._first, self._pixels, self._prev = self.next_id, [], []
        self._keep_from = max(self.next_id - self.horizon, 0)
        return chunk

    def state(self) -> dict[str, Any]:
        """Ids and the frames not yet taken, as plain data (for checkpoints)."""
        pending = np.concatenate(self._pixels) if self._pixels else None
        return {
            "next_id": self.next_id,
            "first": self._first,
            "keep_from": self._keep_from,
            "ids": self.ids.tolist(),
            "pixels": None if pending is None else pending.tolist(),
            "prev": np.concatenate(self._prev).tolist() if self._prev else [],
        }

    def load_state(self, state: dict[str, Any], dtype: np.dtype) -> None:
        """Restore :meth:`state`."""
        self.next_id, self._first = int(state["next_id"]), int(state["first"])
        self._keep_from = int(state["keep_from"])
        self.ids = np.asarray(state["ids"], dtype=np.int64)
        if state["pixels"] is None:
            self._pixels, self._prev = [], []
        else:
            self._pixels = [np.asarray(state["pixels"], dtype=dtype)]
            self._prev = [np.asarray(state["prev"], dtype=np.int64)]
