"""Process lifecycle helpers: signals in the main process, hygiene in child processes."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

import torch

log = logging.getLogger(__name__)


class StopSignals:
    """First SIGINT/SIGTERM asks for a graceful stop; the second interrupts at once.

    Use as a context manager around a training loop and poll :attr:`requested`. Outside the main
    thread (where handlers cannot be installed) it does nothing.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            log.warning("second %s: stopping now", signal.Signals(signum).name)
            raise KeyboardInterrupt
        self.requested = True
        log.warning(
            "%s: stopping gracefully (final checkpoint); send it again to stop now",
            signal.Signals(signum).name,
        )

    def install(self) -> StopSignals:
        """Install the handlers (main thread only)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def restore(self) -> None:
        """Put the previous handlers back (idempotent)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def __enter__(self) -> StopSignals:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.restore()


def init_child(name: str, stop: Any = None) -> int:
    """Set up a child process: ignore SIGINT, die with the parent, one torch thread, a log prefix.

    SIGINT and SIGTERM sent to the whole process group (Ctrl-C, ``scancel``, ``kill -- -pgid``)
    are the learner's to handle: it stops its children in stages. A SIGTERM is obeyed only once
    ``stop`` (the run's stop event) is set, i.e. from the learner's shutdown.

    Returns the parent's pid, to be checked with :func:`parent_alive`.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if stop is not None and stop.is_set():
            os._exit(0)

    signal.signal(signal.SIGTERM, on_sigterm)
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    torch.set_num_threads(1)
    logging.basicConfig(
        level=logging.INFO, format=f"[%(asctime)s][{name}][%(levelname)s] - %(message)s"
    )
    return os.getppid()


def lower_priority(pid: int, nice: int) -> None:
    """Give process ``pid`` the niceness ``nice`` (from its parent, right after the start, so that
    its imports already run at the lower priority). A no-op where unsupported."""
    if nice and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, pid, nice)
        except OSError as exc:
            log.debug("could not lower the priority of %d: %s", pid, exc)


def parent_alive(parent_pid: int) -> bool:
    """Whether the process that started this one is still its parent."""
    return os.getppid() == parent_pid
