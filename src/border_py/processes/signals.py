"""The learner's stop signals: the first SIGINT/SIGTERM stops gracefully, the second at once.

Signals that arrive together (a terminal's Ctrl-C reaching a wrapper and its command, ``timeout``
signalling the command and then its group) count as one: see :data:`SIGNAL_DEBOUNCE`. The run's
children never handle these signals (:mod:`border_py.processes.children`).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ["SIGNAL_DEBOUNCE", "StopSignals"]

log = logging.getLogger(__name__)

SECOND_SIGNAL_WAIT = 1.0  # how long the second signal's line may take before the stop goes on
SIGNAL_DEBOUNCE = 0.5  # seconds after the first stop signal within which another is the same stop


def _warn_from_handler(wait: float, message: str, *args: object) -> None:
    """Log a warning from a signal handler, from a thread of its own (waiting up to ``wait`` s for
    it): the signal may land while this thread is inside a logging handler, whose stream a second
    write from the same thread cannot re-enter (``RuntimeError: reentrant call``); another thread
    waits for the handler's lock instead."""
    thread = threading.Thread(
        target=log.warning, args=(message, *args), name="border-signal-log", daemon=True
    )
    thread.start()
    if wait:
        thread.join(wait)


class StopSignals:
    """First SIGINT/SIGTERM asks for a graceful stop; the second interrupts at once; during the
    shutdown that follows (:meth:`shielded`: bounded by its timeouts) further ones are only logged,
    so that no step of it (killing hung actors, closing the evaluator and the recorders) is skipped.

    Signals that arrive together are one: a second one sooner than :data:`SIGNAL_DEBOUNCE` after
    the first is logged (once) as part of the same stop. ``timeout -s INT`` signals the command,
    then its whole process group (the command again); a terminal's Ctrl-C reaches the group while
    a wrapper script forwards it. The time is the handler's, which Python runs between bytecodes:
    a signal that lands during a long call into C is handled when the call returns.

    One instance per process (:meth:`acquire`): the ``border`` command installs it first thing, so
    a Ctrl-C during start-up is a graceful stop of the run that follows, and ``train`` and the
    tuner use the same one, held for their run: ``with StopSignals.acquire() as signals:``. Poll
    :attr:`requested`. Outside the main thread (where handlers cannot be installed) it does
    nothing.
    """

    _shared: StopSignals | None = None

    def __init__(self) -> None:
        self.requested = False
        self._requested_at = 0.0  # time.monotonic() of the first signal
        self._echoed = False  # a signal that came with the first one was logged
        self._shielded = False
        self._previous: dict[int, Any] = {}
        self._users = 0

    @classmethod
    def acquire(cls) -> StopSignals:
        """The process's instance, installed (if this is its first user); pair with :meth:`release`."""
        if cls._shared is None:
            cls._shared = cls().install()
        cls._shared._users += 1
        return cls._shared

    def release(self) -> None:
        """Done with it: the last user puts the previous handlers back."""
        self._users -= 1
        if self._users <= 0 and StopSignals._shared is self:
            self.restore()
            StopSignals._shared = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._shielded:
            _warn_from_handler(0.0, "%s: already stopping (the actors are being stopped)", name)
            return
        if self.requested:
            after = time.monotonic() - self._requested_at
            if after >= SIGNAL_DEBOUNCE:
                _warn_from_handler(SECOND_SIGNAL_WAIT, "second %s: stopping now", name)
                raise KeyboardInterrupt
            if not self._echoed:
                self._echoed = True
                _warn_from_handler(
                    0.0, "%s %.0f ms after the first: the same stop", name, after * 1e3
                )
            return
        self.requested = True
        self._requested_at = time.monotonic()
        _warn_from_handler(
            0.0, "%s: stopping gracefully (final checkpoint); send it again to stop now", name
        )

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        """Run a shutdown whole: signals that land meanwhile are logged, not raised."""
        self._shielded = True
        try:
            yield
        finally:
            self._shielded = False

    def install(self) -> StopSignals:
        """Install the handlers (main thread only)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        """Put the previous handlers back (idempotent); after a stop signal, not before
        :data:`SIGNAL_DEBOUNCE` has passed since: one that came with it (after a stop that quick)
        is still part of the stop, not a Ctrl-C that kills the process as it exits."""
        if self._previous and self.requested:
            time.sleep(max(0.0, self._requested_at + SIGNAL_DEBOUNCE - time.monotonic()))
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def __enter__(self) -> StopSignals:
        """Hold it (:meth:`acquire` first): it is released when the block ends."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
