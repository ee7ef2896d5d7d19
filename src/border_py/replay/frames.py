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

from typing import Any

import numpy as np

from border_py.replay.chunked import copy_ring
from border_py.transitions import MISSING, ZERO, FrameChunk

__all__ = ["FrameStore"]


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
        """Store a chunk's frames and learn how to translate its local ids.

        A source's local ids only grow: a chunk that starts below the end of its source's last
        segment is a new stream under a reused source id (an actor restarted from its first
        ids). Its source's earlier segments are then forgotten: the new stream's ids name its own
        frames, never the earlier stream's (whose frames stored transitions still reach by their
        global ids).
        """
        m = len(chunk)
        segments = self.sources.get(chunk.source, np.empty((0, 3), np.int64))
        if len(segments) and chunk.first < segments[-1, 0] + segments[-1, 2]:
            segments = np.empty((0, 3), np.int64)
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
            # the last segment starting at or below each id (-1: below every segment)
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
        assert self.pixels is not None, "no frame was stored yet"
        chain = self.chain(gids)
        slots = np.where(chain >= 0, chain % self.capacity, self.capacity)
        # np.take on rows of flat frames: several times faster than fancy indexing on 3-d frames
        flat = self.pixels.reshape(len(self.pixels), -1)
        return np.take(flat, slots, axis=0).reshape(*slots.shape, *self.pixels.shape[1:])

    def state(self) -> dict[str, Any]:
        """Counters and translation tables as plain data; ``ring``: how :meth:`arrays` lays the
        frames out (the ring's size: frame ``g`` in row ``g % ring``)."""
        return {
            "written": self.written,
            "floor": self.first_live,
            "ring": self.capacity,
            "sources": [[int(s), seg.tolist()] for s, seg in self.sources.items()],
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """The frames and their links as the ring holds them (views, no copy): its rows up to the
        last one a live frame is in (every row once it has wrapped)."""
        if self.pixels is None or self.written == self.first_live:
            return {}
        last = self.written - 1
        wrapped = self.first_live // self.capacity != last // self.capacity
        rows = self.capacity if wrapped else last % self.capacity + 1
        return {"frame_pixels": self.pixels[:rows], "frame_prev": self.prev[:rows]}

    def load(self, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays` (into a ring at least as large), chunk by
        chunk (see :mod:`border_py.replay.chunked`). A state without ``ring`` (an older
        checkpoint's) comes with the live frames alone, oldest first.

        Raises:
            ValueError: the live frames do not fit this ring, or the arrays lack some.
        """
        self.written, self.floor = int(state["written"]), int(state["floor"])
        self.sources = {
            int(s): np.asarray(seg, np.int64).reshape(-1, 3) for s, seg in state["sources"]
        }
        if "frame_pixels" not in arrays:
            return
        pixels, prev = arrays["frame_pixels"], arrays["frame_prev"]
        live = self.written - self.floor
        if live > self.capacity:
            raise ValueError(f"{live} saved frames do not fit a ring of {self.capacity}")
        ring, base = (int(state["ring"]), 0) if "ring" in state else (max(live, 1), self.floor)
        self.pixels = np.zeros((self.capacity + 1, *pixels.shape[1:]), np.uint8)
        for dst, src in ((self.pixels, pixels), (self.prev, prev)):
            copy_ring(
                dst,
                src,
                self.floor,
                self.written,
                dst_slots=self.capacity,
                src_slots=ring,
                src_base=base,
            )
