"""Run dirs: one per run, never shared with an earlier run, kept whole.

A fresh run claims its dir by creating :data:`CLAIM` in it (an exclusive create: two runs cannot
both claim one dir); a dir that holds an earlier run (or a recorder's store: :data:`RUN_FILES`) is
refused with a line that says how to continue it instead (``resume=<dir>``, or ``resume=auto``),
and so is a dir there before the command that another user can write in (:func:`refuse_shared`):
what is found in it would be taken for the run's own. ``resume=auto`` continues the run in the dir
if it holds a complete checkpoint, and otherwise starts fresh there after moving whatever an
earlier attempt left (its log, TensorBoard files, result) into ``attempts/<n>/``: nothing of an
earlier run is ever deleted or replaced.

A session holds its run dir for as long as it trains (:mod:`border_py.runs.lock`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import stat
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig

from border_py.errors import ConfigError
from border_py.files import create_file, fsync_dir, make_dir, read_json
from border_py.layout import (
    ATTEMPTS,
    CHECKPOINTS,
    CLAIM,
    LOCK,
    MLFLOW_ARTIFACTS,
    MLFLOW_RUN,
    MLFLOW_STORE,
    RESULT,
    TENSORBOARD,
    WANDB,
    WANDB_RUN,
)
from border_py.runs.links import refuse_links
from border_py.runs.results import read_result
from border_py.runs.timeline import find_checkpoint, newest_checkpoint, run_dir_of_checkpoint
from border_py.secrets import redact_override

__all__ = [
    "RunCompleted",
    "check_fresh",
    "check_sweep",
    "claim",
    "claimed_overrides",
    "fresh_dir",
    "holds_run",
    "set_aside_attempt",
    "settle_resume",
    "start_afresh",
]

log = logging.getLogger(__name__)

# what a run leaves in its dir (Hydra's .hydra/ and train.log are written before a run starts),
# its recorders' stores included: a store found in a fresh run's dir would choose where it records
RUN_FILES = (
    CLAIM,
    CHECKPOINTS,
    TENSORBOARD,
    RESULT,
    MLFLOW_RUN,
    MLFLOW_STORE,
    MLFLOW_ARTIFACTS,
    WANDB,
    WANDB_RUN,
)


def run_files(run_dir: Path) -> list[str]:
    """The files and dirs of a run found in ``run_dir`` (empty: no run was ever there)."""
    return [name for name in RUN_FILES if (run_dir / name).exists()]


def holds_run(run_dir: Path) -> bool:
    """Whether an earlier run used ``run_dir``."""
    return bool(run_files(run_dir))


def refusal(run_dir: Path, key: str = "run_dir") -> ConfigError:
    """The one-line error for a fresh run pointed at a dir that holds an earlier run, or files of
    a run or a recorder without a run's claim or checkpoints (nothing there to continue)."""
    files = run_files(run_dir)
    found = ", ".join(files) or "an earlier run's files"
    if files and not {CLAIM, CHECKPOINTS} & set(files):
        return ConfigError(
            f"{key}={run_dir}: holds {found}, which no border run of this dir wrote (no claim, no"
            " checkpoint) and which would choose where this run records; choose another dir"
        )
    return ConfigError(
        f"{key}={run_dir}: holds an earlier run ({found}); continue it with resume={run_dir}"
        " (or resume=auto), or choose another dir"
    )


def refuse_shared(path: Path, key: str = "run_dir") -> None:
    """Refuse a dir that another user can write in: one not owned by this user, or writable by
    every user (``mkdir -m 1777``; its sticky bit keeps others from removing files, not from
    planting them). A group-writable dir of the user's is accepted: a group may share runs.

    Raises:
        ConfigError: one line naming the dir and its owner or mode.
    """
    found = os.stat(path)
    if found.st_uid != os.geteuid():
        raise ConfigError(
            f"{key}={path}: owned by another user (uid {found.st_uid}), who can put files in it"
            " that border would take for the run's; choose a dir of your own"
        )
    if found.st_mode & stat.S_IWOTH:
        raise ConfigError(
            f"{key}={path}: every user can write in it (mode {stat.S_IMODE(found.st_mode):04o}),"
            " so files found in it may be anyone's; choose a dir of your own (or chmod o-w it)"
        )


def check_fresh(run_dir: Path, key: str = "run_dir", existed: bool = True) -> None:
    """Refuse ``run_dir`` (an existing dir) for a fresh run: another user can write in it
    (:func:`refuse_shared`, asked only when it ``existed`` before the command), it holds a symlink
    (:func:`~border_py.runs.links.refuse_links`), or an earlier run's files (:func:`refusal`).

    Raises:
        ConfigError: one line naming the dir and what was found.
    """
    if existed:
        refuse_shared(run_dir, key)
    refuse_links(run_dir)
    if holds_run(run_dir):
        raise refusal(run_dir, key)


def check_sweep(sweep_dir: Path, fresh: bool, key: str = "hydra.sweep.dir") -> None:
    """Refuse the existing ``sweep_dir`` for a sweep before Hydra writes into it (plain ``open``):
    another user can write in it or a job dir (:func:`refuse_shared`), a link or FIFO among its
    entries (a job dir too) or in a job dir, or, for a new sweep (``fresh``), an earlier sweep's.

    Raises:
        ConfigError: one line naming the dir or entry and what was found.
    """
    refuse_shared(sweep_dir, key)
    refuse_links(sweep_dir, own=False)  # multirun.yaml, and the job dirs themselves
    jobs = sorted(p for p in sweep_dir.iterdir() if p.is_dir()) if sweep_dir.is_dir() else []
    for job in jobs:  # no link among them now
        refuse_shared(job, key)
        refuse_links(job)
    held = run_files(sweep_dir)  # its recorders' stores
    if fresh and (held or any(holds_run(job) for job in jobs)):
        what = f"an earlier sweep's {', '.join(held)}" if held else "the jobs of an earlier sweep"
        raise ConfigError(
            f"{key}={sweep_dir}: holds {what}; choose another dir, or continue its jobs with"
            " resume=auto"
        )


def claim(run_dir: Path, overrides: list[str] | None = None) -> None:
    """Make ``run_dir`` this run's (creating it), or raise the refusal (:func:`check_fresh`; who
    else can write in it is asked only of a dir there before the command, not of one made here or
    by Hydra for this job). The claim records the run's command-line ``overrides`` once, at its
    start: what a resume compares its own with (Hydra rewrites ``.hydra/`` at each attempt of a
    sweep job), secrets redacted."""
    made_for_job = (  # Hydra's: border train's callbacks looked at it before Hydra made or used it
        HydraConfig.initialized()
        and Path(HydraConfig.get().runtime.output_dir).resolve() == run_dir.resolve()
    )
    existed = run_dir.exists() and not made_for_job
    run_dir.mkdir(parents=True, exist_ok=True)
    check_fresh(run_dir, existed=existed)
    overrides = [redact_override(o) for o in overrides or []]
    record = {"pid": os.getpid(), "started": time.time(), "overrides": overrides}
    try:
        create_file(run_dir / CLAIM, json.dumps(record).encode())
    except FileExistsError:  # another run claimed it a moment ago
        raise refusal(run_dir) from None
    fsync_dir(run_dir)


def claimed_overrides(run_dir: Path) -> list[str] | None:
    """The overrides :func:`claim` recorded for the run in ``run_dir`` (None: no such record, e.g.
    a run claimed before claims recorded them)."""
    with contextlib.suppress(OSError, ValueError):
        claimed = read_json(run_dir / CLAIM)
        if isinstance(claimed, dict) and isinstance(claimed.get("overrides"), list):
            return [o for o in claimed["overrides"] if isinstance(o, str)]
    return None


def fresh_dir(path: Path) -> Path:
    """``path`` itself if it does not exist yet, else ``path-2``, ``path-3``, ...: created now,
    atomically, so that two runs started in the same second never share one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        with contextlib.suppress(FileExistsError):  # taken: the next name
            candidate.mkdir()
            return candidate
    raise ConfigError(f"{path}: no free run dir name next to it")


def set_aside_attempt(run_dir: Path, keep: Collection[str] = ()) -> Path | None:
    """Move what an attempt without a checkpoint left in ``run_dir`` (its files, Hydra's and the
    log too, except the names in ``keep``) into ``attempts/<n>/`` (``n``: one more than the
    highest there); return where, or None if it left nothing.

    Raises:
        ConfigError: ``attempts/`` is a symlink (nothing is moved).
    """
    leftovers = (
        [p for p in run_dir.iterdir() if p.name not in (ATTEMPTS, LOCK) and p.name not in keep]
        if run_dir.is_dir()
        else []
    )
    if not any(p.name in RUN_FILES for p in leftovers):
        return None
    attempts = make_dir(run_dir / ATTEMPTS)
    numbers = [int(p.name) for p in attempts.iterdir() if p.name.isascii() and p.name.isdigit()]
    for n in itertools.count(max(numbers, default=0) + 1):
        target = attempts / str(n)
        with contextlib.suppress(FileExistsError):  # taken since (or a link by that name)
            target.mkdir()
            break
    for path in leftovers:
        os.replace(path, target / path.name)
    for changed in (target, attempts, run_dir):
        fsync_dir(changed)
    return target


class RunCompleted(Exception):
    """``resume=auto`` found a run that has completed: nothing is left to do (a job requeued
    after its end). ``result`` is the run's ``result.json``."""

    def __init__(self, run_dir: Path, result: dict[str, Any]) -> None:
        super().__init__(
            f"resume=auto: the run in {run_dir} has completed; nothing to do (to train it"
            f" further: resume={run_dir} trainer.max_opts=<more>)"
        )
        self.result = result


def checkpoint_to_continue(run_dir: Path) -> Path | None:
    """The newest complete checkpoint ``resume=auto`` continues from in ``run_dir`` (None: none).

    Raises:
        RunCompleted: the run in ``run_dir`` has completed.
        ConfigError: the run holds a symlink (see :func:`~border_py.runs.links.refuse_links`).
    """
    refuse_links(run_dir)
    checkpoint = newest_checkpoint(run_dir) if run_dir.is_dir() else None
    if checkpoint is not None:
        result = read_result(run_dir) or {}
        if result.get("status") == "completed":
            raise RunCompleted(run_dir, result)
    return checkpoint


def start_afresh(run_dir: Path, keep: Collection[str] = ()) -> None:
    """``resume=auto`` without a checkpoint: move what an earlier attempt left in ``run_dir`` to
    ``attempts/<n>/`` (all but ``keep``: what this attempt's launcher has already written)."""
    moved = set_aside_attempt(run_dir, keep)
    if moved is not None:
        log.warning(
            "resume=auto: no complete checkpoint in %s; the earlier attempt's files moved to %s",
            run_dir,
            moved,
        )


@dataclass(frozen=True)
class Settled:
    """What a session's ``resume=`` means (see :func:`settle_resume`).

    Attributes:
        checkpoint: the checkpoint to continue from (None: ``resume=auto`` starts the run).
        run_dir: the run's dir.
        fresh: ``resume=auto`` without a checkpoint: the run starts afresh in ``run_dir``, where an
            earlier attempt's files are to be set aside (:func:`start_afresh`).
    """

    checkpoint: Path | None
    run_dir: Path
    fresh: bool = False


def settle_resume(resume: str, run_dir: Path | None) -> Settled:
    """The one rule of ``resume=`` (when it is given: otherwise a run is fresh), for the
    ``border`` command and :func:`border_py.train` alike.

    - ``auto``: continue the run in ``run_dir`` from its newest complete checkpoint, or start it
      afresh there when it has none (a requeued job repeats its command line in the same dir);
    - a run or checkpoint dir: continue that run in its own dir from that checkpoint (a run dir's
      newest).

    Reads the run's files; moves and writes nothing.

    Raises:
        ConfigError: ``auto`` without ``run_dir``, or a path that holds no checkpoint to continue.
        RunCompleted: ``auto`` found a run that has completed: nothing to do.
    """
    if resume == "auto":
        if run_dir is None:
            raise ConfigError(
                "resume=auto: needs the dir to continue in: run_dir=<dir> (or hydra.run.dir=<dir>),"
                " the same for every attempt of a requeued job"
            )
        checkpoint = checkpoint_to_continue(run_dir)
        return Settled(checkpoint, run_dir, fresh=checkpoint is None)
    checkpoint = find_checkpoint(resume)
    return Settled(checkpoint, run_dir_of_checkpoint(checkpoint))
