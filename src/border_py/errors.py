"""The two errors a user sees as one line: a bad setting, and a run that cannot go on; and the
escaping that keeps text read from a file, in such a line or a table, plain text."""

from __future__ import annotations

# C0 controls but tab and newline, DEL and C1 controls (ESC and CSI start terminal sequences)
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
    if chr(code) not in "\t\n"
}


class ConfigError(ValueError):
    """A bad user setting. Its message is one line meant for the terminal."""


class RunError(RuntimeError):
    """A run that cannot go on (e.g. a worker process crashed for good); its message is one line."""


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``ESC`` becomes ``\\x1b``), so that text
    read from a file reaches the terminal as text, never as a terminal sequence."""
    return text.translate(_CONTROLS)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
