"""Stop signals: one that lands while the process is writing a log line; signals that arrive
together.

A Ctrl-C that lands while the main thread is inside a file handler's write used to log its line
from that same thread: the file's buffered writer refused the nested write (``RuntimeError:
reentrant call``) and logging printed a traceback (seen once in CI). The handler's line now comes
from a thread of its own, which waits for the handler's lock.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from border_py.processes.signals import SIGNAL_DEBOUNCE, StopSignals


class InterruptedStream(io.StringIO):
    """A log stream whose first write runs the SIGINT handler in the middle of it, as a Ctrl-C
    landing while the main thread writes a log line does."""

    def __init__(self, signals: StopSignals, raw: io.BufferedWriter) -> None:
        super().__init__()
        self.signals, self.raw, self.interrupted = signals, raw, False
        self.writers: dict[str, str] = {}  # line -> the thread that wrote it

    def write(self, text: str) -> int:
        self.raw.write(text.encode())
        self.writers[text.strip()] = threading.current_thread().name
        if not self.interrupted:
            self.interrupted = True
            self.signals._handle(signal.SIGINT, None)
        return len(text)


def test_a_signal_during_a_log_write_logs_its_line_without_a_logging_error(tmp_path, capsys):
    signals = StopSignals()
    with open(tmp_path / "log", "wb") as raw:
        stream = InterruptedStream(signals, raw)
        handler = logging.StreamHandler(stream)
        logger = logging.getLogger("border_py")
        logger.addHandler(handler)
        try:
            logging.getLogger("border_py.trainers").warning("a line being written")
            for thread in threading.enumerate():
                if thread.name == "border-signal-log":
                    thread.join(5)
        finally:
            logger.removeHandler(handler)
    assert signals.requested
    text = (tmp_path / "log").read_text()
    assert text.index("a line being written") < text.index("SIGINT: stopping gracefully")
    line = next(k for k in stream.writers if k.startswith("SIGINT: stopping gracefully"))
    assert stream.writers[line] == "border-signal-log"  # not the main thread, mid-write
    assert "Logging error" not in capsys.readouterr().err


@contextlib.contextmanager
def captured() -> Iterator[io.StringIO]:
    """border-py's log lines while in the block, the signal handlers' own included."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("border_py")
    logger.addHandler(handler)
    try:
        yield stream
    finally:
        for thread in threading.enumerate():
            if thread.name == "border-signal-log":
                thread.join(5)
        logger.removeHandler(handler)


def test_the_second_signal_logs_its_line_then_interrupts():
    signals = StopSignals()
    with captured() as log:
        signals._handle(signal.SIGINT, None)
        time.sleep(SIGNAL_DEBOUNCE)
        with pytest.raises(KeyboardInterrupt):
            signals._handle(signal.SIGTERM, None)
    assert "second SIGTERM: stopping now" in log.getvalue()


def test_signals_that_arrive_together_are_one_stop():
    """``timeout -s INT`` signals the command, then its process group: two signals 1 ms apart."""
    signals = StopSignals()
    with captured() as log:
        signals._handle(signal.SIGINT, None)
        try:
            signals._handle(signal.SIGINT, None)
            signals._handle(signal.SIGTERM, None)
        except KeyboardInterrupt:
            pytest.fail("a signal that came with the first one interrupted")
    assert signals.requested
    lines = log.getvalue().splitlines()
    assert len(lines) == 2, lines  # the stop, then one line for the signals that came with it
    assert lines[0].startswith("SIGINT: stopping gracefully")
    assert re.fullmatch(r"SIGINT \d+ ms after the first: the same stop", lines[1])


def test_a_signal_that_comes_with_the_first_after_a_quick_stop_is_still_the_stop():
    """The stop may end (and the handlers go back) before the second signal lands: it must not
    reach the previous handler (a KeyboardInterrupt, or death by SIGINT, as the process exits)."""
    previous = signal.getsignal(signal.SIGINT)
    signals = StopSignals().install()
    late = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    with captured() as log:
        signals._handle(signal.SIGINT, None)
        late.start()
        try:
            signals.restore()
            late.join()
        except KeyboardInterrupt:
            pytest.fail("the second signal reached the previous handler")
        finally:
            late.cancel()
            signals.restore()
    assert signal.getsignal(signal.SIGINT) is previous
    assert "the same stop" in log.getvalue()


GROUP_SIGNALS = """
import os, signal, time
from multiprocessing import forkserver
from border_py.processes.children import forkserver_context, init_child, start_process

def child(conn):
    init_child("child")
    conn.send("ready")
    time.sleep(60)

if __name__ == "__main__":
    ctx = forkserver_context()
    parent, end = ctx.Pipe()
    process = ctx.Process(target=child, args=(end,))
    start_process(ctx, process)
    assert parent.poll(60), "the child never started"
    for signum in (signal.SIGINT, signal.SIGTERM):  # this process is the learner: it handles them
        signal.signal(signum, lambda *args: None)
        os.killpg(0, signum)  # a Ctrl-C, then timeout's SIGTERM, to the whole process group
    time.sleep(1.0)
    server = vars(forkserver)["_forkserver"]._forkserver_pid
    print("server", "alive" if os.waitpid(server, os.WNOHANG) == (0, 0) else "dead")
    print("child", "alive" if process.is_alive() else f"dead ({process.exitcode})")
    process.kill()
    process.join(10)
"""


def test_a_stop_signal_to_the_process_group_ends_neither_the_forkserver_nor_its_children(
    tmp_path,
):
    """The learner handles SIGINT and SIGTERM; the forkserver, had SIGTERM ended it, would have
    taken every child with it (their parent-death signal) in the middle of the graceful stop."""
    script = tmp_path / "script.py"
    script.write_text(GROUP_SIGNALS)
    out = subprocess.run(
        [sys.executable, script],
        capture_output=True,
        text=True,
        timeout=120,
        start_new_session=True,  # its own process group, which the test runner is outside of
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-2:] == ["server alive", "child alive"], out.stdout
