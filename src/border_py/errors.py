"""The two errors a user sees as one line: a bad setting, and a run that cannot go on; and the
escaping that keeps text read from a file, in such a line or a table, plain text of a bounded
width."""

from __future__ import annotations

import math
from decimal import Decimal

# C0 controls but tab and newline, DEL and C1 controls (ESC and CSI start terminal sequences)
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
    if chr(code) not in "\t\n"
}
# characters that reorder or hide text (bidi embeddings, overrides, isolates and marks; zero-width
# spaces and joiners, the word joiner, the byte-order mark) and the line and paragraph separators
_INVISIBLE = {
    code: f"\\u{code:04x}"
    for code in (
        0x061C,
        *range(0x200B, 0x2010),
        0x2028,
        0x2029,
        *range(0x202A, 0x202F),
        0x2060,
        *range(0x2066, 0x206A),
        0xFEFF,
    )
}
_ESCAPES = _CONTROLS | _INVISIBLE
NUMBER_WIDTH = 20  # the most characters :func:`number_text` gives


class ConfigError(ValueError):
    """A bad user setting. Its message is one line meant for the terminal."""


class RunError(RuntimeError):
    """A run that cannot go on (e.g. a worker process crashed for good); its message is one line."""


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``ESC`` becomes ``\\x1b``), and the
    characters that reorder or hide text (bidi overrides and isolates such as U+202E, zero-width
    ones such as U+200B, the byte-order mark) escaped as ``\\u202e``, so that text read from a
    file reaches the terminal as the text it is, never as a terminal sequence."""
    return text.translate(_ESCAPES)


def number_text(value: float, decimals: int = 1) -> str:
    """``value`` as text of at most :data:`NUMBER_WIDTH` characters: an int in full, a float with
    ``decimals`` decimals; either in scientific notation when that would be longer
    (``10**4000`` becomes ``1.00e+4000``)."""
    text = str(value) if isinstance(value, int) else f"{value:.{decimals}f}"
    if len(text) <= NUMBER_WIDTH or (isinstance(value, float) and not math.isfinite(value)):
        return text
    return f"{Decimal(value):.2e}"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
