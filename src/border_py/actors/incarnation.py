"""Data in from local actor processes: the learner's handle on one incarnation of an actor slot
(its pipes, and what it sent: batches, its goodbye, its crash report), and the poll that waits on
every running incarnation's notices at once (:class:`~border_py.actors.local.LocalActors` runs
them)."""

from __future__ import annotations

import logging
import select
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from border_py.actors.runtime import ActorRecord, Deliver
from border_py.transport.channel import Readable, SlotRing, hand_back, poll_milliseconds, receive
from border_py.transport.messages import ActorDone, BatchReady, WorkerFailed

__all__ = ["Incarnation", "Notices"]

log = logging.getLogger(__name__)

MESSAGES_PER_POLL = 64  # messages taken from one actor per poll


@dataclass
class Incarnation:
    """The learner's handle on one running incarnation of an actor slot."""

    process: Any
    notices: Connection  # the learner reads
    credits: Connection  # the learner writes
    server: int | None  # the pid of the forkserver that forked it (None: spawned)
    closed: bool = False  # the notices pipe reached EOF

    def __post_init__(self) -> None:
        self.readable = Readable(self.notices)

    def read(self, index: int, ring: SlotRing, record: ActorRecord, deliver: Deliver | None) -> int:
        """Take the messages waiting from actor ``index`` (its batches are in ``ring``, counted in
        ``record``, handed to ``deliver``); note EOF (the actor is gone). Returns the batches."""
        try:
            messages = receive(self.notices, MESSAGES_PER_POLL, self.readable)
        except (EOFError, OSError):
            self.closed = True
            return 0
        delivered = 0
        for message in messages:
            if isinstance(message, BatchReady):
                batch = ring.read(message)
                record.count(batch)
                if deliver is not None:
                    deliver(batch)
                hand_back(self.credits, message.slot)
                delivered += 1
            elif isinstance(message, ActorDone):
                record.end_incarnation(message.sent, message.dropped)
            elif isinstance(message, WorkerFailed):
                log.error("actor %d crashed:\n%s", index, message.error.rstrip())
                record.incarnation_error = message.exception
        return delivered

    def close(self) -> None:
        """Close the learner's ends of its pipes."""
        self.credits.close()
        self.notices.close()


class Notices:
    """One poll over the notices pipes of every running incarnation."""

    def __init__(self) -> None:
        self._poller = select.poll()  # the pipes of self._polled
        self._polled: dict[Connection, int] = {}
        self._by_fd: dict[int, int] = {}

    def ready(self, running: list[Incarnation | None], timeout: float) -> list[int]:
        """The slots whose incarnation sent something (a message, EOF or an error), waiting up to
        ``timeout`` seconds for the first (a short nap when none is running)."""
        links = {run.notices: i for i, run in enumerate(running) if run and not run.closed}
        if not links:
            if timeout > 0:
                time.sleep(min(timeout, 0.05))
            return []
        if links != self._polled:  # an actor started or ended: register the pipes anew
            poller = select.poll()
            for conn in links:
                poller.register(conn.fileno(), select.POLLIN)
            by_fd = {conn.fileno(): i for conn, i in links.items()}
            self._poller, self._polled, self._by_fd = poller, links, by_fd
        return [self._by_fd[fd] for fd, _ in self._poller.poll(poll_milliseconds(timeout))]

    def forget(self) -> None:
        """An incarnation's pipes were closed: their fds may come back as another pipe's, so the
        next poll registers the pipes anew."""
        self._polled = {}
