"""Transitions: the unit of data that flows from actors through the transport into replay and on
to the agent's update, with n-step returns.

A transition is ``(obs, action, reward, next_obs, discount)`` where ``reward`` is the discounted
sum of up to ``n`` rewards and ``discount`` is what multiplies the bootstrap value of ``next_obs``:

    target = reward + discount * V(next_obs)

so ``discount = gamma**k`` after ``k`` steps (``k < n`` when the episode ended early by
truncation: the time limit is not a real end, the value of the final observation still counts)
and ``discount = 0`` when the episode terminated (nothing follows a true end).

Stacked pixel observations may travel frame by frame (:class:`FrameChunk`, see
:mod:`border_py.actors.frames` and :mod:`border_py.replay.frames`).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np

__all__ = ["MISSING", "STORED", "ZERO", "FrameChunk", "Transitions"]

STORED = ("obs", "action", "reward", "next_obs", "discount")
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


@dataclass
class Transitions:
    """A batch of transitions as numpy arrays, the unit actors send and buffers store.

    Only the fields in ``STORED`` are stored as buffer columns; the others are metadata:

    - ``weight``: importance-sampling weights of a prioritized sample (float32, max 1), else None;
    - ``index``: the storage rows a prioritized sample drew (for the priority update), else None;
    - ``priority``: initial priorities (non-negative TD-error magnitudes) computed by the actor
      that sent the batch (``replay_buffer.priority_from_actors``), else None;
    - ``frames``: the new frames a batch of frame references needs (``replay_buffer.frame_stack``):
      ``obs`` and ``next_obs`` then hold the ids of the newest frame of each stack, not the stacks.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    discount: np.ndarray
    weight: np.ndarray | None = None
    index: np.ndarray | None = None
    priority: np.ndarray | None = None
    frames: FrameChunk | None = None

    def __len__(self) -> int:
        return len(self.reward)

    def arrays(self) -> dict[str, np.ndarray]:
        """Stored field name -> array."""
        return {name: getattr(self, name) for name in STORED}

    @staticmethod
    def concat(parts: list[Transitions]) -> Transitions:
        """One batch made of ``parts`` in order (their priorities and frames too; no sample
        metadata)."""
        obs, action, reward, next_obs, discount = (
            np.concatenate([getattr(p, name) for p in parts]) for name in STORED
        )
        out = Transitions(obs, action, reward, next_obs, discount)
        if all(p.priority is not None for p in parts):
            out.priority = np.concatenate([p.priority for p in parts])
        chunks = [p.frames for p in parts if p.frames is not None]
        if chunks:
            out.frames = FrameChunk.concat(chunks)
        return out
