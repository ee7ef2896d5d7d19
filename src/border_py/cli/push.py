"""``border push <run> --repo <owner/name>`` and ``border pull <owner/name>``: share a trained
policy on the Hugging Face Hub, and fetch one.

The commands parse their arguments and call :mod:`border_py.hub` (whose docstrings say what a
pushed folder holds and how its score is measured); bad input is one error line.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from border_py.cli.errors import OneLineParser, fail
from border_py.config import flag
from border_py.errors import ConfigError, RunError
from border_py.hub.contents import pull_dir
from border_py.hub.folder import FORMATS, PushSettings
from border_py.hub.remote import pull, push
from border_py.overrides import parse_overrides
from border_py.runs.trust import check_trust_list

__all__ = ["pull_command", "push_command"]


def _overrides(overrides: list[str], prog: str) -> tuple[tuple[str, ...], bool]:
    """The ``trust=[...]`` and ``check_resources`` of the command line (the only overrides it
    takes)."""
    trusted: tuple[str, ...] = ()
    check = True
    for ov in parse_overrides(overrides):
        if ov.key_or_group == "check_resources":
            value = ov.value()
            flag("check_resources", value)
            check = value is True
        elif ov.key_or_group == "trust":
            trusted += check_trust_list(ov.value())
        else:
            raise ConfigError(
                f"{ov.key_or_group}: {prog} takes trust=[...] and check_resources only as overrides"
            )
    return trusted, check


@contextlib.contextmanager
def _console_log() -> Iterator[None]:
    """border-py's log lines on the console while the command runs (then as before: a caller
    running several commands in one process gets each line once)."""
    from border_py.recorders.console import log_handler

    root = logging.getLogger("border_py")
    handler, level = log_handler(), root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def push_command(args: list[str]) -> int:
    """``border push``: evaluate, build the folder, upload it (or write it: ``--dry-run``)."""
    parser = OneLineParser(
        prog="border push",
        description="Share a run's policy on the Hugging Face Hub: a model card with a fresh"
        " evaluation's score, the checkpoint, the exported policy, the learning curve and a"
        " replay video. Uses huggingface_hub's login (hf auth login, or HF_TOKEN).",
        epilog="example: border push outputs/<date>/<time> --repo your-name/cartpole-dqn",
    )
    parser.add_argument("run", help="a run dir (its best checkpoint, else its newest)")
    parser.add_argument(
        "overrides",
        nargs="*",
        default=[],
        help="trust=[my_pkg]: code the run may import; check_resources=false: sizes only warn",
    )
    parser.add_argument("--repo", required=True, help="the Hub repo: <owner>/<name>")
    parser.add_argument(
        "--dry-run",
        type=Path,
        metavar="DIR",
        help="write the folder to this new dir, upload nothing",
    )
    parser.add_argument(
        "--episodes", type=int, default=100, metavar="N", help="fresh evaluation episodes (100)"
    )
    parser.add_argument("--format", choices=FORMATS, default="numpy", help="the export (numpy)")
    try:
        parsed = parser.parse_intermixed_args(args)
        trust, check_resources = _overrides(parsed.overrides, parser.prog)
        settings = PushSettings(parsed.repo, parsed.episodes, parsed.format, trust, check_resources)
        with _console_log():
            facts, where = push(parsed.run, settings, parsed.dry_run)
    except (ConfigError, RunError, OSError) as exc:
        return _failed(exc)
    score = facts.score
    print(
        f"{facts.algorithm} on {facts.env_id}: mean return {score.text()} over {score.episodes}"
        " fresh episodes"
    )
    print(f"{'written' if parsed.dry_run else 'pushed'}: {where}", flush=True)
    return 0


def _failed(exc: Exception) -> int:
    """One line for what ended push or pull: bad input (2), a failed run or an unwritable dir (1)."""
    if isinstance(exc, ConfigError):
        return fail(str(exc))
    if isinstance(exc, OSError):  # a dir that cannot be written, a full disk
        return fail(f"{exc.filename or 'border'}: {exc.strerror or exc}", 1)
    return fail(str(exc), 1)


def pull_command(args: list[str]) -> int:
    """``border pull``: download a pushed policy into a new dir; say how to load it."""
    parser = OneLineParser(
        prog="border pull",
        description="Download a policy shared with border push into a new dir, keeping only the"
        " files border push writes; it loads with border_py.load_policy(<dir>/checkpoint).",
        epilog="example: border pull your-name/cartpole-dqn  (into ./cartpole-dqn-policy)",
    )
    parser.add_argument("repo", help="the Hub repo: <owner>/<name>")
    parser.add_argument(
        "-o",
        "--out",
        type=Path,
        metavar="DIR",
        help="a new dir, not named as a Python module (default: ./<name>-policy)",
    )
    parser.add_argument("--revision", help="a branch, tag or commit (default: main)")
    try:
        parsed = parser.parse_args(args)
        out = parsed.out if parsed.out is not None else Path(pull_dir(parsed.repo))
        with _console_log():
            checkpoint = pull(parsed.repo, out, parsed.revision)
    except (ConfigError, RunError, OSError) as exc:
        return _failed(exc)
    print(f"pulled: {checkpoint.parent}")
    print(f'load it: border_py.load_policy("{checkpoint}")', flush=True)
    return 0
