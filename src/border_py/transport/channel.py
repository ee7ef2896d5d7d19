"""An actor's channel to the learner: a ring of shared-memory slots, and two pipes.

The learner allocates, per actor, ``n_slots`` slots of preallocated shared arrays laid out for the
run's batches (:class:`BatchLayout`). The actor samples a batch, copies it into a free slot and
sends a small :class:`~border_py.transport.messages.BatchReady` notice on its own pipe; the learner
reads the slot in place as numpy views (nothing is pickled), copies the rows once, into its replay
buffer, and hands the slot back with a credit on a second pipe. An actor with no free slot waits
for a credit (with a timeout, looking at the stop flag in between): that is the back-pressure.

Notices are single atomic pipe writes (see :mod:`border_py.transport.messages`), so a killed actor
can never leave a half-written message that blocks or corrupts the learner; a slot that was being
written when its actor died is never announced, hence never read.
"""

from __future__ import annotations

import contextlib
import math
import select
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.transitions import FrameChunk, Transitions
from border_py.transport.batch import ReceivedBatch
from border_py.transport.messages import BatchReady, Message, decode, encode

__all__ = [
    "BatchLayout",
    "BatchSender",
    "LearnerGone",
    "Readable",
    "SlotRing",
    "hand_back",
    "poll_milliseconds",
    "receive",
    "send",
]

ALIGN = 64  # bytes: every array of a slot starts on a cache line
CREDIT = struct.Struct("<i")


class LearnerGone(RuntimeError):
    """The learner's end of a channel closed: the learner exited or died."""


@dataclass(frozen=True)
class Column:
    """One array of a slot: ``rows`` entries of ``shape`` and ``dtype`` each."""

    name: str
    rows: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes of the array, padded to :data:`ALIGN`."""
        size = self.rows * math.prod(self.shape) * np.dtype(self.dtype).itemsize
        return -(-size // ALIGN) * ALIGN


@dataclass(frozen=True)
class BatchLayout:
    """The arrays of one slot, sized for the largest batch an actor can emit.

    An actor sends once it holds ``n_buffer`` transitions; the block of steps that gets it there
    (one step per missing transition and env, :meth:`~border_py.actors.sampler.Sampler.sample`) may
    add up to ``n_envs * n_step - 1`` more (the pending n-step windows, and envs ending at once
    flush theirs). With frame storage, each env step registers at most two frames per env (the
    next frame, and the first of a new episode).
    """

    columns: tuple[Column, ...]

    @classmethod
    def for_batches(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        n_buffer: int,
        n_envs: int,
        n_step: int,
        frame_stack: int | None = None,
        priorities: bool = False,
    ) -> BatchLayout:
        """The layout for batches of ``n_buffer`` transitions from ``n_envs`` envs."""
        rows = n_buffer + n_envs * n_step
        steps = -(-rows // n_envs) + n_step  # env steps one batch may take
        obs_shape = tuple(observation_space.shape or ())
        if frame_stack:  # observations travel as frame ids; the new frames travel once
            obs = (Column("obs", rows, (), "int64"), Column("next_obs", rows, (), "int64"))
            n_frames = 2 * n_envs * steps + n_envs
            frames: tuple[Column, ...] = (
                Column("frame_pixels", n_frames, obs_shape[1:], str(observation_space.dtype)),
                Column("frame_prev", n_frames, (), "int64"),
            )
        else:
            dtype = str(observation_space.dtype)
            obs = (
                Column("obs", rows, obs_shape, dtype),
                Column("next_obs", rows, obs_shape, dtype),
            )
            frames = ()
        if isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            action = Column("action", rows, tuple(action_space.shape or ()), "int64")
        else:
            action = Column(
                "action", rows, tuple(action_space.shape or ()), str(action_space.dtype)
            )
        columns = (
            obs[0],
            action,
            Column("reward", rows, (), "float32"),
            obs[1],
            Column("discount", rows, (), "float32"),
            *((Column("priority", rows, (), "float32"),) if priorities else ()),
            *frames,
            Column("episode_returns", rows + n_envs, (), "float64"),
            Column("episode_lengths", rows + n_envs, (), "int64"),
        )
        return cls(columns)

    @property
    def nbytes(self) -> int:
        """Bytes of one slot."""
        return sum(c.nbytes for c in self.columns)

    def capacity(self, name: str) -> int:
        """Rows of the named array."""
        return next(c.rows for c in self.columns if c.name == name)

    def views(self, buffer: np.ndarray, offset: int) -> dict[str, np.ndarray]:
        """The slot at byte ``offset`` of ``buffer`` as named arrays (views, no copy)."""
        arrays = {}
        for column in self.columns:
            size = column.rows * math.prod(column.shape) * np.dtype(column.dtype).itemsize
            raw = buffer[offset : offset + size]
            arrays[column.name] = raw.view(column.dtype).reshape(column.rows, *column.shape)
            offset += column.nbytes
        return arrays


class SlotRing:
    """``n_slots`` slots of one :class:`BatchLayout` in one block of shared memory.

    Created by the learner; handed to the actor process as a ``Process`` argument (the block is
    shared, not copied), and kept across the actor's restarts.
    """

    def __init__(self, layout: BatchLayout, n_slots: int, raw: Any) -> None:
        self.layout, self.n_slots, self._raw = layout, n_slots, raw
        buffer = np.frombuffer(raw, dtype=np.uint8)
        self.slots = [layout.views(buffer, k * layout.nbytes) for k in range(n_slots)]

    @classmethod
    def create(cls, ctx: BaseContext, layout: BatchLayout, n_slots: int) -> SlotRing:
        """Allocate the shared block."""
        return cls(layout, n_slots, ctx.RawArray("b", layout.nbytes * n_slots))

    def __getstate__(self) -> dict[str, Any]:
        return {"layout": self.layout, "n_slots": self.n_slots, "raw": self._raw}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["layout"], state["n_slots"], state["raw"])  # type: ignore[misc]

    @property
    def nbytes(self) -> int:
        """Bytes of shared memory the ring takes."""
        return self.layout.nbytes * self.n_slots

    def write(
        self, k: int, batch: Transitions, returns: list[float], lengths: list[int]
    ) -> tuple[int, FrameChunk | None]:
        """Copy a batch (and its episode statistics) into slot ``k``; return (rows, its frames)."""
        slot, n = self.slots[k], len(batch)
        if n > len(slot["reward"]) or len(returns) > len(slot["episode_returns"]):
            raise ValueError(
                f"a batch of {n} transitions and {len(returns)} episodes does not fit a slot of"
                f" {len(slot['reward'])} and {len(slot['episode_returns'])}"
            )
        for name, array in batch.arrays().items():
            slot[name][:n] = array
        if "priority" in slot:
            if batch.priority is None:
                raise ValueError("the batch has no priorities but the channel carries them")
            slot["priority"][:n] = batch.priority
        chunk = batch.frames
        if chunk is not None:
            m = len(chunk)
            if m > len(slot["frame_pixels"]):
                raise ValueError(f"{m} new frames do not fit a slot of {len(slot['frame_pixels'])}")
            slot["frame_pixels"][:m] = chunk.pixels
            slot["frame_prev"][:m] = chunk.prev
        slot["episode_returns"][: len(returns)] = returns
        slot["episode_lengths"][: len(lengths)] = lengths
        return n, chunk

    def read(self, notice: BatchReady) -> ReceivedBatch:
        """The batch a notice announces, as views of its slot (valid until the slot is handed back)."""
        slot, n, e = self.slots[notice.slot], notice.rows, notice.episodes
        batch = Transitions(
            obs=slot["obs"][:n],
            action=slot["action"][:n],
            reward=slot["reward"][:n],
            next_obs=slot["next_obs"][:n],
            discount=slot["discount"][:n],
            priority=slot["priority"][:n] if notice.priorities else None,
        )
        if "frame_pixels" in slot:
            m = notice.frames
            batch.frames = FrameChunk(
                notice.frame_source,
                notice.frame_first,
                slot["frame_pixels"][:m],
                slot["frame_prev"][:m],
                notice.frame_keep_from,
            )
        return ReceivedBatch(
            actor=notice.actor,
            transitions=batch,
            env_steps=notice.env_steps,
            episode_returns=slot["episode_returns"][:e].tolist(),
            episode_lengths=slot["episode_lengths"][:e].tolist(),
            policy_opt_steps=notice.policy_opt_steps,
            loaded_at=notice.loaded_at,
            exploration=dict(notice.exploration),
            waited=notice.waited,
        )


def send(conn: Connection, message: Message) -> None:
    """Write one message as a single atomic pipe write."""
    conn.send_bytes(encode(message))


def poll_milliseconds(timeout: float) -> int:
    """``timeout`` seconds as ``select.poll``'s argument: whole milliseconds, rounded up, and 0 for
    a negative timeout (``poll`` waits forever on a negative one)."""
    return math.ceil(timeout * 1000) if timeout > 0 else 0


class Readable:
    """Whether ``conn`` has something to read (a message, or its EOF): one ``select.poll``
    registered once, where ``Connection.poll`` builds a selector every time, several times the
    cost, more while actors load every core (docs/04-scaling/performance.md): a learner asks at
    least twice per batch, and once per opt step for its evaluator's results."""

    def __init__(self, conn: Connection) -> None:
        self._poll = select.poll()
        self._poll.register(conn.fileno(), select.POLLIN)

    def __call__(self, timeout: float = 0.0) -> bool:
        """Whether there is something to read, waiting up to ``timeout`` seconds for it."""
        return bool(self._poll.poll(poll_milliseconds(timeout)))


def receive(conn: Connection, limit: int, readable: Readable | None = None) -> list[Any]:
    """Up to ``limit`` whole messages already waiting on ``conn`` (never blocks); ``readable``,
    if given, is ``conn``'s.

    A writer's last messages come back before its EOF: a call that reads some and then meets the
    EOF returns them, and the next call raises.

    Raises:
        EOFError: every writer of the pipe is gone and nothing it wrote is left to read.
    """
    ready = readable if readable is not None else lambda: conn.poll(0)
    messages: list[Any] = []
    while len(messages) < limit and ready():
        try:
            data = conn.recv_bytes()
        except EOFError:
            if messages:
                break
            raise
        messages.append(decode(data))
    return messages


class BatchSender:
    """The actor's end of its channel: free slots, the notices pipe, the credits pipe.

    Args:
        ring: the actor's slots.
        notices: the pipe end the actor writes notices to.
        credits: the pipe end the learner writes slot credits to.
    """

    def __init__(self, ring: SlotRing, notices: Connection, credits: Connection) -> None:
        self.ring, self.notices, self.credits = ring, notices, credits
        self.free: deque[int] = deque(range(ring.n_slots))

    def wait_for_slot(self, keep_waiting: Callable[[], bool], poll_seconds: float = 0.1) -> bool:
        """Wait until a slot is free, looking at ``keep_waiting`` every ``poll_seconds``.

        Returns False if ``keep_waiting`` said to stop first.

        Raises:
            LearnerGone: the learner closed its end (it exited or died).
        """
        while not self.free:
            if not keep_waiting():
                return False
            self.take_credits(poll_seconds)
        return True

    def take_credits(self, timeout: float) -> None:
        """Collect the slots the learner handed back (waiting up to ``timeout`` for the first)."""
        try:
            if not self.credits.poll(timeout):
                return
            while self.credits.poll(0):
                self.free.append(CREDIT.unpack(self.credits.recv_bytes())[0])
        except (EOFError, OSError):
            raise LearnerGone("the learner closed the channel") from None

    def send(self, notice: BatchReady) -> None:
        """Announce a slot the actor has filled (see :meth:`SlotRing.write`).

        Raises:
            LearnerGone: the learner is gone.
        """
        try:
            send(self.notices, notice)
        except OSError:
            raise LearnerGone("the learner closed the channel") from None


def hand_back(credits: Connection, slot: int) -> None:
    """The learner's credit for ``slot``; an actor that is gone no longer needs it."""
    with contextlib.suppress(OSError):  # the actor died: the credits pipe has no reader
        credits.send_bytes(CREDIT.pack(slot))
