"""A run's checkpoints over time, in ``<run dir>/checkpoints/``: which are complete, the newest,
the one a user names (a run or a checkpoint dir), pruning the old ones, and a resume's new
timeline (the checkpoints newer than the one it continues, set aside into ``abandoned/``).

One checkpoint, written and loaded: :mod:`border_py.runs.checkpoint`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from pathlib import Path

from border_py.errors import ConfigError
from border_py.files import fsync_dir, make_dir
from border_py.layout import (
    ABANDONED,
    AGENT,
    BEST,
    CHECKPOINTS,
    CONFIG,
    META,
    POLICY,
    TRAINER,
)
from border_py.runs.links import refuse_links

__all__ = [
    "POLICY_FILES",
    "REQUIRED",
    "find_checkpoint",
    "holds_policy",
    "is_complete",
    "newest_checkpoint",
    "periodic_checkpoints",
    "prune",
    "run_dir_of_checkpoint",
    "set_aside_newer",
    "step_name",
]

REQUIRED = (POLICY, AGENT, TRAINER, CONFIG, META)
# what acting with a policy needs: a shared checkpoint (border push) holds these alone
POLICY_FILES = (POLICY, CONFIG, META)
STEP_DIR = re.compile(r"^\d{9}$")


def step_name(opt_steps: int) -> str:
    """The directory name of a periodic checkpoint: opt steps zero-padded to 9 digits."""
    return f"{opt_steps:09d}"


def is_complete(path: Path) -> bool:
    """Whether ``path`` holds every file of a checkpoint."""
    return all((path / f).is_file() for f in REQUIRED)


def holds_policy(path: Path) -> bool:
    """Whether ``path`` holds what acting needs (:data:`POLICY_FILES`): a complete checkpoint, or
    a shared one without the training state (``border push``'s)."""
    return all((path / f).is_file() for f in POLICY_FILES)


def periodic_checkpoints(root: Path) -> list[Path]:
    """Complete periodic checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if STEP_DIR.match(p.name) and is_complete(p)]
    return sorted(found, key=lambda p: p.name)


def newest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint of the run in ``run_dir``: the last periodic one, else
    ``best`` (a run stopped before its first periodic checkpoint), else None."""
    periodic = periodic_checkpoints(run_dir / CHECKPOINTS)
    if periodic:
        return periodic[-1]
    best = run_dir / CHECKPOINTS / BEST
    return best if is_complete(best) else None


def find_checkpoint(path: str | Path, policy_only: bool = False) -> Path:
    """The checkpoint a user points at: a checkpoint dir itself, or a run dir's newest complete one.

    With ``policy_only`` a checkpoint dir that holds only :data:`POLICY_FILES` is taken too (to
    act, never to resume).

    The run it belongs to (or, for a checkpoint dir outside a run, the checkpoint) must hold no
    symlink (see :func:`~border_py.runs.links.refuse_links`): checked as the user named it and
    once links in the user's own path are resolved.

    Raises:
        ConfigError: missing path, not a border-py run, no complete checkpoint, or a symlink in
            the run.
    """
    given = Path(os.path.abspath(Path(path).expanduser()))
    path = given.resolve()
    if not path.exists():
        raise ConfigError(f"{path}: no such file or directory")
    if is_complete(path) or (policy_only and holds_policy(path)):
        _refuse_links(given, path)
        return path
    if (path / CHECKPOINTS).is_dir():
        _refuse_links(given, path)
        newest = periodic_checkpoints(path / CHECKPOINTS)
        if newest:
            return newest[-1]
        raise ConfigError(f"{path}: the run has no complete checkpoint to start from")
    if path.parent.name == CHECKPOINTS:
        missing = [f for f in REQUIRED if not (path / f).is_file()]
        raise ConfigError(f"{path}: incomplete checkpoint (missing {', '.join(missing)})")
    raise ConfigError(
        f"{path}: not a border-py run or checkpoint directory (no checkpoints/ inside)"
    )


def _refuse_links(given: Path, found: Path) -> None:
    """:func:`~border_py.runs.links.refuse_links` for the run of ``given`` (a run or checkpoint
    dir as the user named it) and of ``found`` (the same, the user's own links resolved)."""
    for run in dict.fromkeys(_run_of(p) or p for p in (given, found)):
        refuse_links(run)


def _run_of(path: Path) -> Path | None:
    """The run a checkpoint dir belongs to: ``<run>/checkpoints/<name>`` or an abandoned one,
    ``<run>/checkpoints/abandoned/<name>`` (None: neither)."""
    if path.parent.name == CHECKPOINTS:
        return path.parent.parent
    if path.parent.name == ABANDONED and path.parent.parent.name == CHECKPOINTS:
        return path.parents[2]
    return None


def run_dir_of_checkpoint(checkpoint: Path) -> Path:
    """The run directory a checkpoint belongs to, to continue it in.

    Raises:
        ConfigError: the checkpoint is not one of a run's ``checkpoints/`` (an abandoned
            timeline's is refused: its run has gone on without it).
    """
    if checkpoint.parent.name != CHECKPOINTS:
        raise ConfigError(
            f"{checkpoint}: not in a run's checkpoints/ dir, so there is no run to continue"
            " (an abandoned one: move it back into checkpoints/ to resume from it)"
        )
    return checkpoint.parent.parent


def prune(root: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` periodic checkpoints (``best`` is never deleted)."""
    for old in periodic_checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def set_aside_newer(root: Path, opt_steps: int) -> list[Path]:
    """Move checkpoints newer than ``opt_steps`` to ``root/abandoned/`` (a run resumed from an
    older checkpoint starts a new timeline): the periodic ones, which would be mistaken for its
    newest, and ``best`` when it was saved later (the new timeline would replace it at its first
    evaluation above the older best). A name already taken there (a timeline abandoned earlier)
    gets a suffix: ``<step>.2``, ``best.2``, ...

    Raises:
        ConfigError: ``root/abandoned`` is a symlink (nothing is moved).
    """
    newer = [path for path in periodic_checkpoints(root) if int(path.name) > opt_steps]
    best = root / BEST
    if best.is_dir() and _saved_after(best, opt_steps):
        newer.append(best)
    if not newer:
        return []
    abandoned = make_dir(root / ABANDONED)
    moved = []
    for path in newer:
        target = abandoned / path.name
        for k in itertools.count(2):
            if not os.path.lexists(target):
                break
            target = abandoned / f"{path.name}.{k}"
        os.replace(path, target)
        moved.append(target)
    fsync_dir(abandoned)
    fsync_dir(root)
    return moved


def _saved_after(checkpoint: Path, opt_steps: int) -> bool:
    """Whether ``checkpoint``'s ``meta.json`` says it was saved after ``opt_steps`` (one that
    does not say counts as later: set aside rather than replaced)."""
    try:
        saved = json.loads((checkpoint / META).read_text()).get("opt_steps")
    except (OSError, ValueError, AttributeError):
        return True
    return not isinstance(saved, int) or saved > opt_steps
