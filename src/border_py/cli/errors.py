"""How ``border`` reports bad input and failed runs: one line on stderr and an exit status."""

from __future__ import annotations

import sys

from border_py.secrets import redact_text

# C0 controls but tab and newline, DEL and C1 controls (ESC and CSI start terminal sequences)
_CONTROLS = {
    code: f"\\x{code:02x}"
    for code in (*range(0x00, 0x20), *range(0x7F, 0xA0))
    if chr(code) not in "\t\n"
}


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``ESC`` becomes ``\\x1b``), so that text
    read from a file reaches the terminal as text, never as a terminal sequence."""
    return text.translate(_CONTROLS)


def fail(message: str, status: int = 2) -> int:
    """Print one error line for ``border`` (secrets redacted: job logs keep it) and return
    ``status`` (2: bad input, 1: a failed run)."""
    print(f"border: error: {printable(redact_text(message))}", file=sys.stderr)
    return status
