"""The two errors a user sees as one line: a bad setting, and a run that cannot go on."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad user setting. Its message is one line meant for the terminal."""


class RunError(RuntimeError):
    """A run that cannot go on (e.g. a worker process crashed for good); its message is one line."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
