"""An actor's channel to the learner: a ring of shared-memory slots, and two pipes.

The learner allocates, per actor, ``n_slots`` slots of preallocated shared arrays laid out for the
run's batches (:class:`~border_py.transport.layout.BatchLayout`: of transitions, or of a recurrent
agent's sequences). The actor samples a batch, copies it into a free slot (once every array of it
fits) and sends a small :class:`~border_py.transport.messages.BatchReady` notice on its own pipe;
the learner reads the slot in place as numpy views (nothing is pickled), copies the rows once,
into its replay buffer, and hands the slot back with a credit on a second pipe. An actor with no free slot waits
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
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

import numpy as np

from border_py.sequences import STORED_SEQUENCE, Sequences
from border_py.transitions import STORED, FrameChunk, Transitions
from border_py.transport.batch import ReceivedBatch
from border_py.transport.layout import BatchLayout
from border_py.transport.messages import BatchReady, Message, decode, encode

__all__ = [
    "BatchSender",
    "LearnerGone",
    "Readable",
    "SlotRing",
    "hand_back",
    "poll_milliseconds",
    "receive",
    "send",
]

CREDIT = struct.Struct("<i")


class LearnerGone(RuntimeError):
    """The learner's end of a channel closed: the learner exited or died."""


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
        self, k: int, batch: Transitions | Sequences, returns: list[float], lengths: list[int]
    ) -> tuple[int, FrameChunk | None]:
        """Copy a batch (and its episode statistics) into slot ``k``; return (rows, its frames).

        Raises:
            ValueError: the batch is not the kind the slot carries, does not fit it, or has no
                priorities where the slot carries them (sequences: or no keys).
        """
        slot, n = self.slots[k], len(batch)
        if isinstance(batch, Sequences) != (self.layout.burn_in is not None):
            carried = "transitions" if self.layout.burn_in is None else "sequences"
            raise ValueError(f"a {type(batch).__name__} batch for a channel of {carried}")
        if n > len(slot["reward"]) or len(returns) > len(slot["episode_returns"]):
            raise ValueError(
                f"a batch of {n} rows and {len(returns)} episodes does not fit a slot of"
                f" {len(slot['reward'])} and {len(slot['episode_returns'])}"
            )
        arrays = batch.arrays()
        for name, array in arrays.items():
            if np.shape(array)[1:] != slot[name].shape[1:]:
                raise ValueError(
                    f"the batch's {name} rows are {np.shape(array)[1:]}, the slot's"
                    f" {slot[name].shape[1:]}"
                )
        if isinstance(batch, Sequences):
            if batch.key is None or np.shape(batch.key) != (n, 3):
                raise ValueError(
                    f"the sequences' keys are {None if batch.key is None else np.shape(batch.key)},"
                    f" expected {(n, 3)} (a SequenceBuilder cuts them)"
                )
            arrays = arrays | {"key": batch.key}
        for name, array in arrays.items():
            slot[name][:n] = array
        if "priority" in slot:
            if batch.priority is None:
                raise ValueError("the batch has no priorities but the channel carries them")
            slot["priority"][:n] = batch.priority
        chunk = batch.frames if isinstance(batch, Transitions) else None
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
        priority = slot["priority"][:n] if notice.priorities else None
        batch: Transitions | Sequences
        if self.layout.burn_in is not None:
            columns = {name: slot[name][:n] for name in STORED_SEQUENCE}
            batch = Sequences(
                **columns, burn_in=self.layout.burn_in, priority=priority, key=slot["key"][:n]
            )
        else:
            obs, action, reward, next_obs, discount = (slot[name][:n] for name in STORED)
            batch = Transitions(obs, action, reward, next_obs, discount, priority=priority)
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
