"""Hydra callbacks of ``border train``, registered in ``conf/train.yaml`` (``hydra.callbacks``).

:class:`RunDirs` settles the run dir before Hydra writes anything into it: ``run_dir=X`` makes X
Hydra's run dir too (every file of the run in one place); a dir named explicitly that holds an
earlier run is refused in one line; a default, time-stamped dir is created atomically, with a
suffix if another run took that second's name. After a sweep it reads every job's outcome back
from the job dirs (``result.json``), whatever launcher ran them (in this process, in joblib's
workers, through submitit), so that ``border`` exits 1 naming the failed jobs, and ends with one
line that counts the jobs' outcomes and names ``border report <sweep dir>``. What Hydra records
of a job before it starts (``.hydra/``, the sweep's ``multirun.yaml``) is rewritten with its
secrets redacted (:mod:`border_py.secrets`).
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import yaml
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, read_write

from border_py.cli.errors import fail
from border_py.config import is_number
from border_py.errors import ConfigError
from border_py.files import write_file
from border_py.layout import HYDRA, HYDRA_RECORDS, MULTIRUN
from border_py.runs.results import read_result
from border_py.runs.run_dir import check_fresh, check_sweep, fresh_dir, holds_run
from border_py.secrets import redact

__all__ = ["RunDirs", "report_sweep", "sweep_summary"]


class SweepOutcome:
    """The last sweep's jobs, as read back from their dirs (set in the process that ran Hydra)."""

    sweep_dir: Path | None = None
    jobs: list[Path] = []
    failed: list[Path] = []
    statuses: list[str | None] = []  # each job's result.json status (None: the job died)

    @classmethod
    def clear(cls) -> None:
        """Forget the last sweep (before a sweep starts, and once it is reported)."""
        cls.sweep_dir, cls.jobs, cls.failed, cls.statuses = None, [], [], []


def _explicit(config: DictConfig, key: str) -> bool:
    """Whether ``key`` (e.g. ``hydra.run.dir``) was set on the command line."""
    given = list(config.hydra.overrides.hydra) + list(config.hydra.overrides.task)
    return any(o.split("=", 1)[0].lstrip("+") == key for o in given)


def _refuse(error: ConfigError) -> None:
    """End ``border train`` with one line, before Hydra writes anything (exit status 2)."""
    raise SystemExit(fail(str(error)))


def _paths_as_text(config: DictConfig) -> None:
    """``run_dir`` and ``resume`` as the paths they name: Hydra reads ``run_dir=0`` (a sweep's
    job dirs are named 0, 1, ...) as the int 0, which would read as no dir at all."""
    for key in ("run_dir", "resume"):
        value = config.get(key)
        if is_number(value):
            config[key] = str(value)


class RunDirs(Callback):
    """See the module docstring."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Make ``run_dir`` and Hydra's run dir one dir, and never an earlier run's."""
        _paths_as_text(config)
        if config.get("resume"):  # the run continues in its own dir (set by border train)
            return
        with read_write(config.hydra):
            if config.get("run_dir"):
                config.hydra.run.dir = str(Path(config.run_dir).expanduser().resolve())
                explicit = True
            else:
                explicit = _explicit(config, "hydra.run.dir")
            run_dir = Path(str(config.hydra.run.dir)).expanduser().resolve()
            if explicit:
                key = "run_dir" if config.get("run_dir") else "hydra.run.dir"
                try:  # before Hydra opens train.log or writes .hydra/ in it
                    if run_dir.exists():
                        check_fresh(run_dir, key)
                except ConfigError as exc:
                    _refuse(exc)
            else:
                config.hydra.run.dir = str(fresh_dir(run_dir))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse an explicit sweep dir that holds earlier runs; make the default one unique."""
        SweepOutcome.clear()
        if config.get("run_dir"):
            _refuse(
                ConfigError(
                    "run_dir: cannot be set in a multirun (each job gets its own dir under"
                    " hydra.sweep.dir); set hydra.sweep.dir instead"
                )
            )
        sweep_dir = Path(str(config.hydra.sweep.dir)).expanduser().resolve()
        if _explicit(config, "hydra.sweep.dir"):
            if sweep_dir.exists():  # the jobs' recorders share stores in it (MLflow's mlflow.db)
                try:  # before Hydra writes multirun.yaml, and .hydra/ in its jobs
                    check_sweep(sweep_dir, fresh=config.get("resume") != "auto")
                except ConfigError as exc:
                    _refuse(exc)
            return
        unique = fresh_dir(sweep_dir)
        with read_write(config.hydra):
            config.hydra.sweep.dir = str(unique)
            # every job's config is composed again from these overrides
            config.hydra.overrides.hydra.append(f"hydra.sweep.dir='{unique}'")

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Redact the secrets of what Hydra has just recorded: the job's ``.hydra/`` files and,
        in a sweep, ``multirun.yaml`` (the job itself runs with the config as given)."""
        records = []
        if config.hydra.output_subdir is not None:
            hydra_dir = Path(str(config.hydra.runtime.output_dir)) / str(config.hydra.output_subdir)
            records += [hydra_dir / name for name in HYDRA_RECORDS]
        if config.hydra.mode == RunMode.MULTIRUN:
            records.append(Path(str(config.hydra.sweep.dir)) / MULTIRUN)
        for path in records:
            _redact_record(path)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Read every job's outcome from its dir: a job without ``result.json`` died."""
        sweep_dir = Path(str(config.hydra.sweep.dir))
        jobs = sorted(
            (p for p in sweep_dir.iterdir() if (p / HYDRA).is_dir() or holds_run(p)),
            key=lambda p: (len(p.name), p.name),
        )
        statuses = [(read_result(job) or {}).get("status") for job in jobs]
        SweepOutcome.sweep_dir, SweepOutcome.jobs, SweepOutcome.statuses = sweep_dir, jobs, statuses
        SweepOutcome.failed = [
            job for job, s in zip(jobs, statuses, strict=True) if s not in OK_STATUSES
        ]


OK_STATUSES = ("completed", "interrupted")


def _redact_record(path: Path) -> None:
    """Rewrite the YAML file ``path`` with its secrets redacted (left alone when it has none or is
    missing), atomically and never through a link (:func:`~border_py.files.write_file`)."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        return
    redacted = redact(data)
    if redacted != data:
        write_file(path, yaml.safe_dump(redacted, sort_keys=False, allow_unicode=True).encode())


def report_sweep() -> int:
    """After ``border train -m``: a line naming the failed jobs, if any (exit status 1, else 0),
    then the last line: how many jobs ended how, and the command that compares them."""
    sweep_dir, jobs, failed = SweepOutcome.sweep_dir, SweepOutcome.jobs, SweepOutcome.failed
    statuses = SweepOutcome.statuses
    SweepOutcome.clear()
    if sweep_dir is None:  # no sweep ended here (a single run)
        return 0
    status = 0
    if failed:
        status = fail(
            f"{len(failed)} of {len(jobs)} sweep jobs failed"
            f" (see result.json or train.log in: {', '.join(str(p) for p in failed)})",
            1,
        )
    print(f"border: {sweep_summary(statuses, sweep_dir)}", file=sys.stderr)
    return status


def sweep_summary(statuses: list[str | None], sweep_dir: Path) -> str:
    """``N jobs, K completed, F failed; compare them: border report <sweep dir>`` (the sweep dir
    relative to the working dir when under it, quoted for a shell where it needs to be)."""
    completed = statuses.count("completed")
    interrupted = statuses.count("interrupted")
    failed = len(statuses) - completed - interrupted
    counts = f"{len(statuses)} job{'' if len(statuses) == 1 else 's'}, {completed} completed,"
    counts += f" {failed} failed"
    if interrupted:
        counts += f", {interrupted} interrupted"
    try:
        shown = sweep_dir.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = sweep_dir.resolve()
    return f"{counts}; compare them: border report {shlex.quote(str(shown))}"
