"""Frame storage for stacked pixel observations: each frame stored once, stacks rebuilt on demand.

An env wrapped in gymnasium's ``FrameStackObservation(k)`` returns stacks of the last ``k``
frames; consecutive stacks of an episode share ``k - 1`` of them, so storing two stacks per
transition stores every frame ``2k`` times. Here every frame is stored once, with a link to the
frame below it in its stack (the previous frame of the same env's episode). Following ``k - 1``
links from a stack's newest frame rebuilds the stack. At an episode's start ``FrameStackObservation``
pads with copies of the reset frame (``padding_type="reset"``, its default) or with zeros
(``"zero"``): the reset frame links to itself, or to :data:`ZERO`, so the padding comes out the same.

The actor side (:class:`FrameEncoder`) gives each new frame a local id and sends it once, in a
:class:`FrameChunk`, with the transitions; transitions then carry the local ids of the newest
frames of ``obs`` and ``next_obs``. The learner side (:class:`FrameStore`) keeps a ring of frames
under global ids (the order frames arrived in), translates each source's local ids, and tells
which stacks are still whole: a stack whose frames the ring has overwritten is never rebuilt.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

ZERO = -1  # the link below a bottom frame padded with zeros: the rest of the stack is zeros
MISSING = -2  # an id the store cannot resolve: overwritten, or never received


@dataclass
class FrameChunk:
    """New frames of one source (one sampler's envs), sent with the transitions that use them.

    Attributes:
        source: identifies the sampler (its env seed); local ids are per source.
        first: local id of ``pixels[0]``; the others follow consecutively.
        pixels: the frames, uint8 ``(m, H, W)``.
        prev: int64 ``(m,)``: local id of the frame below each one in its stack (its own id for a
            reset frame padded with itself, :data:`ZERO` for one padded with zeros).
        keep_from: this chunk, the transitions sent with it and everything later from this source
            use no frame whose local id is below this (the store may forget older ones).
    """

    source: int
    first: int
    pixels: np.ndarray
    prev: np.ndarray
    keep_from: int

    def __len__(self) -> int:
        return len(self.pixels)

    @staticmethod
    def concat(chunks: list[FrameChunk]) -> FrameChunk:
        """Consecutive chunks of one source as one."""
        for a, b in pairwise(chunks):
            if b.source != a.source or b.first != a.first + len(a):
                raise ValueError("frame chunks must be consecutive chunks of one source")
        return FrameChunk(
            chunks[0].source,
            chunks[0].first,
            np.concatenate([c.pixels for c in chunks]),
            np.concatenate([c.prev for c in chunks]),
            chunks[0].keep_from,
        )


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
    """

    def __init__(self, source: int, n_envs: int, n_step: int, first_obs: np.ndarray) -> None:
        self.source = source
        # An env step adds at most 2 frames per env (next frame, reset frame). A later transition
        # references the obs of a pending n-step window (registered at most n_step steps ago) or
        # links to an env's current frame: never more than this many local ids back.
        self.horizon = 2 * n_envs * (n_step + 1)
        self.next_id = 0
        self._first = 0  # local id of the first frame not yet taken
        self._keep_from = 0  # no transition emitted from now on uses a frame below this
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


class FrameStore:
    """Learner side: a ring of frames under global ids, with each source's local ids translated.

    Args:
        capacity: frames kept (the oldest are overwritten).
        stack: frames per stack (``k``).
    """

    def __init__(self, capacity: int, stack: int) -> None:
        self.capacity, self.stack = capacity, stack
        self.pixels: np.ndarray | None = None  # (capacity + 1, H, W); the last slot stays zeros
        self.prev = np.full(capacity, MISSING, dtype=np.int64)
        self.written = 0  # frames received so far = the next global id
        self.floor = 0  # no frame below this global id is held (a restored ring starts above 0)
        # per source: rows (local start, global start, length) of the local ids it can translate
        self.sources: dict[int, np.ndarray] = {}

    @property
    def first_live(self) -> int:
        """The oldest global id the ring still holds."""
        return max(self.written - self.capacity, self.floor)

    def add(self, chunk: FrameChunk) -> None:
        """Store a chunk's frames and learn how to translate its local ids."""
        m = len(chunk)
        segments = self.sources.get(chunk.source, np.empty((0, 3), np.int64))
        last = segments[-1] if len(segments) else None
        if (
            last is not None
            and last[0] + last[2] == chunk.first
            and last[1] + last[2] == self.written
        ):
            segments[-1, 2] += m  # continues the last segment (one source alone: one segment)
        elif m:
            segments = np.vstack([segments, [[chunk.first, self.written, m]]])
        segments = segments[segments[:, 0] + segments[:, 2] > chunk.keep_from]
        self.sources[chunk.source] = segments
        if m:
            if self.pixels is None:
                self.pixels = np.zeros((self.capacity + 1, *chunk.pixels.shape[1:]), np.uint8)
            prev = self.translate(chunk.source, chunk.prev)  # after the segment: links may be in it
            keep = slice(max(m - self.capacity, 0), m)
            slots = (self.written + np.arange(m)[keep]) % self.capacity
            self.pixels[slots] = chunk.pixels[keep]
            self.prev[slots] = prev[keep]
            self.written += m
        # forget sources whose frames are all overwritten (e.g. actors that stopped)
        for source in [s for s, seg in self.sources.items() if s != chunk.source]:
            seg = self.sources[source]
            seg = seg[seg[:, 1] + seg[:, 2] > self.first_live]
            if len(seg):
                self.sources[source] = seg
            else:
                del self.sources[source]

    def translate(self, source: int, local: np.ndarray) -> np.ndarray:
        """Global ids of ``source``'s local ids (:data:`ZERO` stays; unknown or overwritten:
        :data:`MISSING`)."""
        local = np.asarray(local, dtype=np.int64)
        segments = self.sources.get(source, np.empty((0, 3), np.int64))
        out = np.full(local.shape, MISSING, dtype=np.int64)
        if len(segments):
            seg = np.searchsorted(segments[:, 0], local, side="right") - 1
            start, gid, length = segments[np.maximum(seg, 0)].T
            inside = (seg >= 0) & (local < start + length)
            out = np.where(inside, gid + local - start, MISSING)
            out[out < self.first_live] = MISSING
        out[local == ZERO] = ZERO
        return out

    def chain(self, gids: np.ndarray) -> np.ndarray:
        """``(B, k)`` global ids of the stacks whose newest frames are ``gids``, oldest first
        (:data:`ZERO` for zero padding, :data:`MISSING` where a frame is gone)."""
        out = np.empty((len(gids), self.stack), dtype=np.int64)
        g = np.where(np.asarray(gids) >= self.first_live, gids, MISSING)
        for level in range(self.stack - 1, -1, -1):
            out[:, level] = g
            below = self.prev[np.maximum(g, 0) % self.capacity]
            below = np.where((below >= self.first_live) | (below == ZERO), below, MISSING)
            g = np.where(g >= 0, below, g)
        return out

    def oldest(self, gids: np.ndarray) -> np.ndarray:
        """Per stack, its oldest frame's global id (:data:`MISSING` if one is gone already)."""
        chain = self.chain(gids)
        missing = (chain == MISSING).any(axis=1)
        oldest = np.where(chain >= 0, chain, np.iinfo(np.int64).max).min(axis=1)
        return np.where(missing, MISSING, oldest)

    def live(self, oldest: np.ndarray) -> np.ndarray:
        """Which stacks (given their :meth:`oldest` ids) the ring still holds whole."""
        return oldest >= self.first_live

    def stacks(self, gids: np.ndarray) -> np.ndarray:
        """The stacks whose newest frames are ``gids`` (all live), uint8 ``(B, k, H, W)``."""
        chain = self.chain(gids)
        slots = np.where(chain >= 0, chain % self.capacity, self.capacity)
        # np.take on rows of flat frames: several times faster than fancy indexing on 3-d frames
        flat = self.pixels.reshape(len(self.pixels), -1)
        return np.take(flat, slots, axis=0).reshape(*slots.shape, *self.pixels.shape[1:])

    def state(self) -> dict[str, Any]:
        """Counters and translation tables as plain data."""
        return {
            "written": self.written,
            "floor": self.first_live,
            "sources": [[int(s), seg.tolist()] for s, seg in self.sources.items()],
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The live frames and their links, oldest first."""
        if self.pixels is None:
            return {}
        slots = np.arange(self.first_live, self.written) % self.capacity
        return {"frame_pixels": self.pixels[slots], "frame_prev": self.prev[slots]}

    def load(self, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (into a ring at least as large)."""
        self.written, self.floor = int(state["written"]), int(state["floor"])
        self.sources = {
            int(s): np.asarray(seg, np.int64).reshape(-1, 3) for s, seg in state["sources"]
        }
        if "frame_pixels" not in arrays:
            return
        pixels, prev = arrays["frame_pixels"], arrays["frame_prev"]
        if len(pixels) > self.capacity:
            raise ValueError(f"{len(pixels)} saved frames do not fit a ring of {self.capacity}")
        self.pixels = np.zeros((self.capacity + 1, *pixels.shape[1:]), np.uint8)
        slots = np.arange(self.floor, self.written) % self.capacity
        self.pixels[slots] = pixels
        self.prev[slots] = prev
