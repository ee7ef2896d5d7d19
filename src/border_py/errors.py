"""The two errors a user sees as one line: a bad setting, and a run that cannot go on; and the
escaping that keeps text read from a file, in such a line, a table or a log line, plain text of a
bounded width."""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from decimal import Decimal

__all__ = [
    "NUMBER_WIDTH",
    "ConfigError",
    "RunError",
    "TextFormatter",
    "first_line",
    "number_text",
    "printable",
]

# the Unicode categories of characters that are not text one sees: controls (Cc: C0 but tab and
# newline, DEL, C1; ESC and CSI start terminal sequences), format characters (Cf: bidi embeddings,
# overrides, isolates and marks, zero-width spaces and joiners, soft hyphens, invisible operators,
# tag characters, the byte-order mark), lone surrogates (Cs), line and paragraph separators (Zl,
# Zp), private-use (Co) and unassigned code points (Cn)
_HIDDEN = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn"))
# letters that show as nothing: the Hangul fillers
_BLANK_LETTERS = frozenset("\u115f\u1160\u3164\uffa0")
_CANDIDATES = re.compile(r"[^\t\n -~]+")  # runs of all but printable ASCII, tab and newline
NUMBER_WIDTH = 20  # the most characters :func:`number_text` gives


class ConfigError(ValueError):
    """A bad user setting. Its message is one line meant for the terminal."""


class RunError(RuntimeError):
    """A run that cannot go on (e.g. a worker process crashed for good); its message is one line."""


def printable(text: str) -> str:
    """``text`` with every character that is not visible text escaped as Python writes it in a
    string (``ESC`` becomes ``\\x1b``, a right-to-left override ``\\u202e``, a tag character
    ``\\U000e0041``), so that text read from a file reaches the terminal as the text it is, never
    as a terminal sequence, reordered or hidden. Escaped: the Unicode categories of controls but
    tab and newline (Cc), format characters (Cf), surrogates (Cs), line and paragraph separators
    (Zl, Zp), private-use and unassigned code points (Co, Cn), and the Hangul fillers; other text
    (accented letters, CJK, emoji, spaces) stays as it is."""
    return _CANDIDATES.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    """The matched run of characters with those that are not visible text escaped."""
    run = match[0]
    if run.isprintable() and _BLANK_LETTERS.isdisjoint(run):  # none (a C-speed test)
        return run
    return "".join(_escaped_char(char) for char in run)


def _escaped_char(char: str) -> str:
    if char not in _BLANK_LETTERS and unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


class TextFormatter(logging.Formatter):
    """A log formatter whose lines are plain text: each formatted record (its message, its
    arguments, a traceback) goes through :func:`printable`, so no log line carries a terminal
    sequence or a character that reorders or hides text, whatever a call site passes; a record's
    newlines and tabs stay (a traceback reads as one)."""

    def format(self, record: logging.LogRecord) -> str:
        """The formatted record, escaped."""
        return printable(super().format(record))


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
