"""How ``border`` reports bad input and failed runs: one line on stderr and an exit status."""

from __future__ import annotations

import sys

from border_py.errors import printable
from border_py.secrets import redact_text


def fail(message: str, status: int = 2) -> int:
    """Print one error line for ``border`` (secrets redacted: job logs keep it) and return
    ``status`` (2: bad input, 1: a failed run)."""
    print(f"border: error: {printable(redact_text(message))}", file=sys.stderr)
    return status
