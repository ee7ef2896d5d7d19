"""How ``border`` reports bad input and failed runs: one line on stderr and an exit status;
Hydra's multi-line errors and argparse's usage errors worded as such a line."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from border_py.errors import ConfigError, first_line, printable
from border_py.secrets import redact_text

__all__ = ["OneLineParser", "fail", "hydra_error_line"]


def fail(message: str, status: int = 2) -> int:
    """Print one error line for ``border`` (secrets redacted: job logs keep it) and return
    ``status`` (2: bad input, 1: a failed run)."""
    print(f"border: error: {printable(redact_text(message))}", file=sys.stderr)
    return status


class OneLineParser(argparse.ArgumentParser):
    """The argument parser of every ``border`` command: a bad argument is one
    :class:`ConfigError` line naming the command and where its help is (the command prints it
    with :func:`fail`, exit 2), not argparse's usage lines and exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(f"{self.prog}: {message} (see {self.prog} --help)")


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
