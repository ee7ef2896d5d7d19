"""A trial process: sample the params of the trial the driver created, train with them in the
trial's run dir, report each evaluation to the study (stopping when the pruner says so), and record
the outcome.

Everything a trial process needs arrives as a :class:`TrialTask` (plain data: it crosses a
``spawn`` boundary). The driver (:mod:`.tuner`) creates the trial before it starts the process, so
it knows which trial each process runs: a process that dies before recording an outcome leaves
its trial RUNNING, and the driver marks it FAIL, whatever the storage.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from border_py.config import build
from border_py.files import LogFile
from border_py.layout import LOG
from border_py.secrets import RedactingFormatter
from border_py.tuning.space import compose_train, override
from border_py.tuning.storage import open_storage

__all__ = ["INTERRUPTED", "TrialTask", "objective_so_far", "run_trial"]

log = logging.getLogger("border_py.tune")

INTERRUPTED = 130  # exit status of a trial (and of border tune) stopped by a signal


@dataclass
class TrialTask:
    """What a trial process needs (plain data: it crosses a process boundary).

    ``trial_id`` and ``number`` name the trial the driver created for the process; ``run_dir``
    is its run dir (made by the driver); ``storage`` is the study's storage location
    (:func:`~border_py.tuning.storage.locate`).
    """

    trial_id: int
    number: int
    run_dir: str
    storage: str
    study_name: str
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


def _objective(trial: Any, task: TrialTask) -> float:
    """Train with the trial's params; return the run's objective. Raises ``TrialPruned`` when the
    pruner stopped the run (a run the config's own callbacks stopped is a completed trial),
    :class:`TrialInterrupted` when a signal did."""
    import optuna

    from border_py.overrides import to_plain
    from border_py.runs.settings import RunSettings
    from border_py.trainers.train import train

    values = _suggest(trial, task.params)
    given = [*task.overrides, *(override(k, v) for k, v in values.items())]
    returns: list[float] = []
    pruned: list[int] = []  # the opt step the pruner stopped the run at
    cfg = compose_train([*given, f"run_dir={task.run_dir}", "progress=false"], task.entries)
    kind = RunSettings.of(to_plain(cfg)).objective

    def on_eval(opt_steps: int, env_steps: int, return_mean: float) -> bool:
        returns.append(return_mean)
        trial.report(objective_so_far(kind, returns), opt_steps)
        if trial.should_prune():
            pruned.append(opt_steps)
        return bool(pruned)

    summary = train(cfg, overrides=given, on_eval=on_eval)
    if summary["interrupted"]:
        raise TrialInterrupted(f"stopped by a signal at opt step {summary['opt_steps']}")
    if pruned:
        raise optuna.TrialPruned(f"pruned at opt step {summary['opt_steps']}")
    return float(summary["objective"])


def run_trial(task: TrialTask) -> None:
    """A trial process: run the trial the driver created (sample the params, train with them,
    report each evaluation, stop when the pruner says so) and record its outcome in the study.
    Exits with 130 when a signal stopped the run (the trial is FAIL)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)  # the trial's own log says what happened
    study = optuna.load_study(
        study_name=task.study_name,
        storage=open_storage(task.storage),
        sampler=sampler_of(task.sampler, task.number),
        pruner=build("pruner", task.pruner) if task.pruner else optuna.pruners.NopPruner(),
    )
    study.get_trials(deepcopy=False)  # RDBStorage's cache learns of a trial created elsewhere
    trial = optuna.trial.Trial(study, task.trial_id)
    _log_into(Path(task.run_dir))
    try:
        value = _objective(trial, task)
    except optuna.TrialPruned:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    except TrialInterrupted:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
        raise SystemExit(INTERRUPTED) from None
    except KeyboardInterrupt:  # before the run started, or a second signal: the driver marks it
        raise SystemExit(INTERRUPTED) from None
    except Exception:
        log.exception("trial %d failed", trial.number)
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, value)  # a NaN objective is recorded as FAIL by Optuna
