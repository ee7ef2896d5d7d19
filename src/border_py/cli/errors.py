"""How ``border`` reports bad input and failed runs: one line on stderr and an exit status, and
Hydra's multi-line errors worded as such a line."""

from __future__ import annotations

import sys

from border_py.errors import first_line, printable
from border_py.secrets import redact_text


def fail(message: str, status: int = 2) -> int:
    """Print one error line for ``border`` (secrets redacted: job logs keep it) and return
    ``status`` (2: bad input, 1: a failed run)."""
    print(f"border: error: {printable(redact_text(message))}", file=sys.stderr)
    return status


def hydra_error_line(exc: Exception) -> str:
    """Hydra's error as one line, keeping the lines that say what to type instead (``To append
    to your config use +key=value``, ``Either remove + prefix: ...``) and the options it lists."""
    lines = str(exc).splitlines()
    first = first_line(exc).rstrip(".")
    hints: list[str] = []
    for i, line in enumerate(lines[1:], start=1):
        text = line.strip()
        if text.startswith(("To ", "Either ", "Or ")):
            hints.append(text[0].lower() + text[1:])
        elif text.startswith("Available options in"):
            listed = []
            for option in lines[i + 1 :]:
                if not option.startswith("\t"):
                    break
                listed.append(option.strip())
            hints.append(f"{text[0].lower()}{text[1:].rstrip(':')}: {', '.join(listed)}")
    return f"{first} ({'; '.join(hints)})" if hints else first
