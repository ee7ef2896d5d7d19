"""Stop signals that land while the process is writing a log line.

A Ctrl-C that lands while the main thread is inside a file handler's write used to log its line
from that same thread: the file's buffered writer refused the nested write (``RuntimeError:
reentrant call``) and logging printed a traceback (seen once in CI). The handler's line now comes
from a thread of its own, which waits for the handler's lock.
"""

from __future__ import annotations

import io
import logging
import signal
import threading

import pytest

from border_py.processes import StopSignals


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


def test_the_second_signal_logs_its_line_then_interrupts(tmp_path):
    signals = StopSignals()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("border_py")
    logger.addHandler(handler)
    try:
        signals._handle(signal.SIGINT, None)
        with pytest.raises(KeyboardInterrupt):
            signals._handle(signal.SIGTERM, None)
    finally:
        logger.removeHandler(handler)
    assert "second SIGTERM: stopping now" in stream.getvalue()
