"""How ``border`` reports bad input and failed runs: one line on stderr and an exit status."""

from __future__ import annotations

import sys


def fail(message: str, status: int = 2) -> int:
    """Print one error line for ``border`` and return ``status`` (2: bad input, 1: a failed run)."""
    print(f"border: error: {message}", file=sys.stderr)
    return status
