"""A trial process: sample the params, train with them in the trial's run dir, report each
evaluation to the study (stopping when the pruner says so), and record the outcome.

Everything a trial process needs arrives as a :class:`TrialTask` (plain data: it crosses a
``spawn`` boundary); the study is shared through Optuna's SQLite storage with heartbeats, so a
trial whose process was killed is marked FAIL.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from border_py.config import build
from border_py.files import LogFile, make_dir
from border_py.layout import LOG
from border_py.secrets import RedactingFormatter
from border_py.tuning.space import compose_train, override

log = logging.getLogger("border_py.tune")

HEARTBEAT_SECONDS = 30  # a trial process that stops beating this long (+ grace) is marked FAIL
GRACE_SECONDS = 120
SQLITE_TIMEOUT_SECONDS = 60  # how long a process waits for another one's write lock
INTERRUPTED = 130  # exit status of a trial (and of border tune) stopped by a signal


def storage(url: str) -> Any:
    """Optuna's SQLite storage with heartbeats (a killed trial process is marked FAIL)."""
    import optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)  # heartbeat
    return optuna.storages.RDBStorage(
        url,
        engine_kwargs={"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}},
        heartbeat_interval=HEARTBEAT_SECONDS,
        grace_period=GRACE_SECONDS,
    )


@dataclass
class TrialTask:
    """What a trial process needs (plain data: it crosses a process boundary)."""

    launch: str
    seed_offset: int
    url: str
    study_name: str
    study_dir: str
    sampler: dict[str, Any] | None
    pruner: dict[str, Any] | None
    overrides: list[str]
    params: dict[str, dict[str, Any]]
    entries: list[str]


def sampler_of(spec: dict[str, Any] | None, seed_offset: int) -> Any:
    """The trial's sampler: the spec's ``seed`` plus the trial's offset, so that parallel
    processes, each with its own sampler, do not draw the same values."""
    if spec is None:
        return None
    spec = dict(spec)
    if spec.get("seed") is not None:
        spec["seed"] = int(spec["seed"]) + seed_offset
    return build("sampler", spec)


def objective_so_far(objective: str, returns: list[float]) -> float:
    """What a trial reports after each evaluation: the run's objective if it ended now."""
    if objective == "final":
        return returns[-1]
    if objective == "mean":
        return sum(returns) / len(returns)
    return max(returns)


class TrialInterrupted(Exception):
    """A trial's run was stopped by a signal (the trial is marked FAIL)."""


def _log_into(run_dir: Path) -> None:
    """Send the process's log (the trial's run included) to ``<run_dir>/train.log``."""
    from border_py.recorders.console import PLAIN_FORMAT

    handler = LogFile(run_dir / LOG)
    handler.setFormatter(RedactingFormatter(PLAIN_FORMAT))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)


def _suggest(trial: Any, params: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The trial's value of each param, drawn by its ``Trial.suggest_<type>``."""
    return {
        name: getattr(trial, f"suggest_{spec['type']}")(
            name, **{k: v for k, v in spec.items() if k != "type"}
        )
        for name, spec in params.items()
    }


def run_trial(task: TrialTask) -> None:
    """A trial process: sample the params, train with them, report each evaluation to the study
    (stopping when the pruner says so), and record the outcome in the study. Exits with 130 when
    a signal stopped the run."""
    import optuna

    from border_py.overrides import to_plain
    from border_py.trainers.train import train

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the trial's own log says what happened
    study = optuna.load_study(
        study_name=task.study_name,
        storage=storage(task.url),
        sampler=sampler_of(task.sampler, task.seed_offset),
        pruner=build("pruner", task.pruner) if task.pruner else optuna.pruners.NopPruner(),
    )

    interrupted = False

    def objective(trial: optuna.Trial) -> float:
        nonlocal interrupted
        trial.set_user_attr("launch", task.launch)
        run_dir = Path(task.study_dir) / "trials" / str(trial.number)
        make_dir(run_dir)  # never a symlink
        trial.set_user_attr("run_dir", str(run_dir))
        _log_into(run_dir)
        values = _suggest(trial, task.params)
        given = [*task.overrides, *(override(k, v) for k, v in values.items())]
        returns: list[float] = []

        def on_eval(opt_steps: int, env_steps: int, return_mean: float) -> bool:
            returns.append(return_mean)
            trial.report(objective_so_far(kind, returns), opt_steps)
            return trial.should_prune()

        try:
            cfg = compose_train([*given, f"run_dir={run_dir}", "progress=false"], task.entries)
            kind = to_plain(cfg).get("objective", "best")
            summary = train(cfg, overrides=given, on_eval=on_eval)
        except Exception:
            log.exception("trial %d failed", trial.number)
            raise
        if summary["interrupted"]:
            interrupted = True
            raise TrialInterrupted(f"stopped by a signal at opt step {summary['opt_steps']}")
        if summary["stopped_by_callback"]:
            raise optuna.TrialPruned(f"pruned at opt step {summary['opt_steps']}")
        return float(summary["objective"])

    try:
        study.optimize(objective, n_trials=1, catch=(Exception,))
    except KeyboardInterrupt:  # before the run started, or a second signal
        raise SystemExit(INTERRUPTED) from None
    if interrupted:
        raise SystemExit(INTERRUPTED)
