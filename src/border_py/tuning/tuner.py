"""The pool of trial processes of one study: ``n_jobs`` at a time, a first Ctrl-C (or SIGTERM)
that starts no new trial and lets the running ones stop gracefully, a second one that terminates
them; each trial's outcome logged, a trial left RUNNING by a crashed process marked FAIL, and
``best.yaml`` kept current."""

from __future__ import annotations

import logging
import math
import multiprocessing
import uuid
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import yaml

from border_py.config import positive
from border_py.files import write_file
from border_py.processes.signals import StopSignals
from border_py.resources import usable_cores
from border_py.secrets import redact_override
from border_py.tuning.space import (
    SearchSpace,
    check_n_jobs,
    check_space,
    last_wins,
    load_space,
    override,
    search_path,
)
from border_py.tuning.trial import INTERRUPTED, TrialTask, run_trial, storage

log = logging.getLogger("border_py.tune")

STORAGE_FILE = "study.db"
BEST_FILE = "best.yaml"
STOP_SECONDS = 60  # after a second Ctrl-C: how long a terminated trial gets to stop gracefully
POLL_SECONDS = 1.0


def cores_per_trial(config: dict[str, Any]) -> int:
    """CPU cores one trial keeps busy: the learner, plus one per actor with the async trainer
    (the evaluator process is idle between evaluations)."""
    if config["trainer"]["_target_"].endswith("SerialTrainer"):
        return 1
    return 1 + int(config["actor_manager"]["n_actors"])


class Tuner:
    """Runs a study's trials, ``n_jobs`` processes at a time, and keeps ``best.yaml`` current.

    Args:
        space: the search space.
        study_dir: where the study (``study.db``), the trials' run dirs and ``best.yaml`` go.
        overrides: ``border train`` overrides for every trial (after the space's own).
        entries: Hydra search-path entries (``--config-dir``) for the trials' configs.
        n_trials: trials to run now (null: the space's ``n_trials``).
        n_jobs: trials at once (null: the space's ``n_jobs``; ``auto``: as cores allow).
    """

    def __init__(
        self,
        space: SearchSpace,
        study_dir: Path,
        overrides: list[str],
        entries: list[str],
        n_trials: int | None = None,
        n_jobs: int | str | None = None,
    ) -> None:
        self.space, self.study_dir, self.entries = space, study_dir, entries
        self.overrides = last_wins([*space.overrides, *overrides])
        self.n_trials = space.n_trials if n_trials is None else n_trials
        positive("--n-trials", self.n_trials, int)
        jobs = space.n_jobs if n_jobs is None else n_jobs
        check_n_jobs("--n-jobs", jobs)
        config = check_space(space, self.overrides, entries)
        per_trial = cores_per_trial(config)
        auto = max(1, usable_cores() // per_trial)
        self.n_jobs = min(self.n_trials, auto if jobs == "auto" else int(jobs))
        if self.n_jobs > auto:
            log.warning(
                "%d trials at once x %d busy processes each on %d cores: trials will be slower",
                self.n_jobs,
                per_trial,
                usable_cores(),
            )
        self.url = f"sqlite:///{study_dir / STORAGE_FILE}"

    def run(self) -> int:
        """Run the trials; return the exit status (0, or 130 when stopped by a signal).

        The first Ctrl-C (or SIGTERM) starts no new trial and waits for the running ones (a
        Ctrl-C reaches them too: each stops gracefully, its trial is marked FAIL); a second one
        terminates them.
        """
        import optuna

        self.study_dir.mkdir(parents=True, exist_ok=True)
        study = optuna.create_study(
            study_name=self.space.study_name,
            storage=storage(self.url),
            direction="maximize",
            load_if_exists=True,
        )
        before = len(study.trials)
        log.info(
            "study %s (%d trials so far) in %s: %d trials, %d at once",
            self.space.study_name,
            before,
            self.study_dir,
            self.n_trials,
            self.n_jobs,
        )
        ctx = multiprocessing.get_context("spawn")
        tag = uuid.uuid4().hex[:8]
        running: dict[str, Any] = {}
        launched, stopping = 0, False
        with StopSignals() as signals:
            try:
                while running or (launched < self.n_trials and not stopping):
                    stopping = stopping or signals.requested
                    while not stopping and launched < self.n_trials and len(running) < self.n_jobs:
                        launch = f"{tag}-{launched}"
                        process = ctx.Process(
                            target=run_trial,
                            args=(self.task(launch, before + launched),),
                            name=f"trial-{launch}",
                        )
                        process.start()
                        running[launch] = process
                        launched += 1
                    wait([p.sentinel for p in running.values()], timeout=POLL_SECONDS)
                    for launch, process in list(running.items()):
                        if process.exitcode is not None:
                            del running[launch]
                            self.finished(study, launch, process.exitcode)
                            stopping = stopping or process.exitcode == INTERRUPTED
            except KeyboardInterrupt:  # the second signal
                log.warning("stopping now: terminating %d running trials", len(running))
                self.terminate(study, running)
                stopping = True
        self.write_best(study)
        if stopping:
            log.warning("stopped after %d of %d trials", launched, self.n_trials)
            return INTERRUPTED
        return 0

    def task(self, launch: str, seed_offset: int) -> TrialTask:
        """The trial process's instructions."""
        return TrialTask(
            launch=launch,
            seed_offset=seed_offset,
            url=self.url,
            study_name=self.space.study_name,
            study_dir=str(self.study_dir),
            sampler=self.space.sampler,
            pruner=self.space.pruner,
            overrides=self.overrides,
            params=self.space.params,
            entries=self.entries,
        )

    def terminate(self, study: Any, running: dict[str, Any]) -> None:
        """Stop the running trial processes (SIGTERM: a graceful stop, then SIGKILL)."""
        for process in running.values():
            process.terminate()
        for launch, process in running.items():
            process.join(timeout=STOP_SECONDS)
            if process.is_alive():
                process.kill()
                process.join(timeout=10)
            self.finished(study, launch, process.exitcode)

    def finished(self, study: Any, launch: str, exitcode: int | None) -> None:
        """Log a trial's outcome; a trial left RUNNING by a crashed process is marked FAIL."""
        import optuna

        trials = [
            t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("launch") == launch
        ]
        if not trials:
            log.error("trial process %s exited (%s) before its trial started", launch, exitcode)
            return
        trial = trials[0]
        if trial.state == optuna.trial.TrialState.RUNNING:
            trial = study.tell(
                trial.number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True
            )
        params = " ".join(override(k, v) for k, v in trial.params.items())
        run_dir = trial.user_attrs.get("run_dir", "?")
        state = trial.state.name
        if state == "COMPLETE":
            best = study.best_trial.number == trial.number
            log.info(
                "trial %d complete: %.2f%s | %s",
                trial.number,
                trial.value,
                " (best)" if best else "",
                params,
            )
        elif state == "PRUNED":
            step = trial.last_step
            log.info("trial %d pruned at opt step %s | %s", trial.number, step, params)
        else:
            why = "stopped by a signal" if exitcode == INTERRUPTED else f"failed (exit {exitcode})"
            log.warning(
                "trial %d %s, marked FAIL: see %s/train.log | %s",
                trial.number,
                why,
                run_dir,
                params,
            )
        self.write_best(study)

    def write_best(self, study: Any) -> None:
        """``best.yaml``: the best trial (value, params, run dir, the overrides that reproduce it)
        and how many trials ended in each state."""
        import optuna

        states: dict[str, int] = {}
        for trial in study.get_trials(deepcopy=False):
            states[trial.state.name] = states.get(trial.state.name, 0) + 1
        record: dict[str, Any] = {
            "study": self.space.study_name,
            "storage": self.url,
            "trials": states,
        }
        complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        finite = [t for t in complete if t.value is not None and math.isfinite(t.value)]
        if finite:
            best = max(finite, key=lambda t: t.value)
            params = [override(k, v) for k, v in best.params.items()]
            record |= {
                "best_trial": best.number,
                "best_value": best.value,
                "best_params": dict(best.params),
                "best_run_dir": best.user_attrs.get("run_dir"),
                "best_command": " ".join(
                    ["border train", *map(redact_override, self.overrides), *params]
                ),
            }
        write_file(self.study_dir / BEST_FILE, yaml.safe_dump(record, sort_keys=False).encode())


def tune(
    space_name: str,
    overrides: list[str],
    config_dirs: list[str],
    study_dir: Path | None = None,
    n_trials: int | None = None,
    n_jobs: int | str | None = None,
) -> int:
    """Run (or continue) a search; return the exit status."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    entries = search_path(config_dirs)
    space = load_space(space_name, entries)
    where = (study_dir or Path("outputs") / "tune" / space.study_name).expanduser().resolve()
    return Tuner(space, where, overrides, entries, n_trials, n_jobs).run()
