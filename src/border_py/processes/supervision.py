"""Supervising the run's workers (actors, the evaluator): heartbeats, and when to restart one.

A worker beats its slot of :class:`Heartbeats` while it works; the learner kills one silent for
longer than its timeout. :class:`RestartPolicy` then decides whether the dead worker may start
again or the run ends, in one line that says why.
"""

from __future__ import annotations

import time
from multiprocessing.context import BaseContext
from typing import Any

import numpy as np

from border_py.processes.children import lost_with_forkserver

__all__ = ["Heartbeats", "RestartPolicy", "exit_cause"]


class Heartbeats:
    """A shared array of ``time.monotonic()`` stamps, one per worker slot.

    Workers write their own slot often (a single aligned store: no lock); the learner reads how
    long each has been silent. ``CLOCK_MONOTONIC`` is system-wide, so stamps compare across
    processes.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._stamps = np.frombuffer(raw, dtype=np.float64)

    @classmethod
    def create(cls, ctx: BaseContext, n: int) -> Heartbeats:
        """Room for ``n`` workers."""
        return cls(ctx.RawArray("d", n))

    def __getstate__(self) -> dict[str, Any]:
        return {"raw": self._raw}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["raw"])  # type: ignore[misc]

    def beat(self, slot: int) -> None:
        """Worker ``slot`` is alive and working."""
        self._stamps[slot] = time.monotonic()

    def silent_for(self, slot: int) -> float:
        """Seconds since worker ``slot`` last beat."""
        return time.monotonic() - float(self._stamps[slot])


class RestartPolicy:
    """Decides whether a worker that died may be restarted, and words the line when it may not.

    A worker is not restarted once it has used its ``max_restarts``, when it failed (an exception,
    or an exit with an error status) before delivering anything (a setup error: a restart would
    fail the same way), or
    when it failed twice in a row with the same exception. A worker killed from outside (a signal,
    the OOM killer, a lost forkserver, a heartbeat timeout) is restarted while restarts remain.

    Args:
        what: the worker's name in messages, e.g. ``actor 3`` or ``the evaluator``.
        max_restarts: restarts allowed.
    """

    def __init__(self, what: str, max_restarts: int) -> None:
        self.what, self.max_restarts = what, max_restarts
        self.restarts = 0
        self.last_error: str | None = None

    def verdict(
        self, cause: str, error: str | None, delivered: bool, exitcode: int | None = None
    ) -> str | None:
        """After a death: None to restart (counted), else the one line that ends the run.

        Args:
            cause: how it died, e.g. ``exit code 1`` or ``silent for 3.0 s``.
            error: the exception line it reported, if it reported one.
            delivered: whether this incarnation delivered anything before dying.
            exitcode: its exit code (negative: killed by a signal; None: killed by the learner).
        """
        detail = f": {error}" if error else ""
        if self.restarts >= self.max_restarts:
            return (
                f"{self.what} died ({cause}) after {self.restarts} restarts"
                f" (actor_manager.max_restarts={self.max_restarts}){detail}; see the log for its"
                " traceback"
            )
        failed = error is not None or (exitcode is not None and exitcode > 0)
        if failed and not delivered:
            return (
                f"{self.what} failed ({cause}) before delivering anything{detail} (a restart would"
                " fail the same way); see the log (or the output above) for why"
            )
        if error is not None and error == self.last_error:
            return f"{self.what} failed twice with the same error{detail}; see the log for its traceback"
        self.last_error = error
        self.restarts += 1
        return None


def exit_cause(exitcode: int | None, server: int | None) -> tuple[str, int | None]:
    """How a worker that exited died, for :meth:`RestartPolicy.verdict`: the cause in words and
    the exit code it counts (None: killed from outside).

    Args:
        exitcode: the worker's exit code as ``multiprocessing`` reads it.
        server: the pid of the forkserver that forked it (None: spawned). A worker that died
            with its forkserver (:func:`~border_py.processes.children.lost_with_forkserver`) was
            killed from outside, whatever the exit code reads.
    """
    if lost_with_forkserver(server, exitcode):
        return "its fork server died", None
    return f"exit code {exitcode}", exitcode
