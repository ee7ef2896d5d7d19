"""The pool of trial processes of one study: ``n_jobs`` at a time, a first Ctrl-C (or SIGTERM)
that starts no new trial and lets the running ones stop gracefully, a second one that terminates
them; each trial created here before its process starts (so a trial whose process died without
recording an outcome is known, and marked FAIL), its outcome logged, and ``best.yaml`` kept
current."""

from __future__ import annotations

import logging
import multiprocessing
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

import yaml

from border_py.config import positive
from border_py.errors import ConfigError
from border_py.files import make_dir, present, write_file
from border_py.processes.signals import StopSignals
from border_py.resources import usable_cores
from border_py.secrets import redact_text
from border_py.tuning.best import best_record
from border_py.tuning.space import (
    SearchSpace,
    check_n_jobs,
    check_space,
    last_wins,
    load_space,
    override,
    search_path,
)
from border_py.tuning.storage import locate, open_storage
from border_py.tuning.trial import INTERRUPTED, TrialTask, run_trial

__all__ = ["TRIALS", "tune"]

log = logging.getLogger("border_py.tune")

BEST_FILE = "best.yaml"
TRIALS = "trials"  # the study dir's dir of the trials' run dirs, one per trial number
STOP_SECONDS = 60  # after a second Ctrl-C: how long a terminated trial gets to stop gracefully
POLL_SECONDS = 1.0


def cores_per_trial(config: dict[str, Any]) -> int:
    """CPU cores one trial keeps busy: the learner, plus one per actor with the async trainer
    (the evaluator process is idle between evaluations)."""
    if config["trainer"]["_target_"].endswith("SerialSettings"):
        return 1
    return 1 + int(config["actor_manager"]["n_actors"])


class Tuner:
    """Runs a study's trials, ``n_jobs`` processes at a time, and keeps ``best.yaml`` current.

    Args:
        space: the search space.
        study_dir: where the trials' run dirs, ``best.yaml`` and (by default) the study's
            journal go.
        overrides: ``border train`` overrides for every trial (after the space's own).
        entries: Hydra search-path entries (``--config-dir``) for the trials' configs.
        n_trials: trials to run now (null: the space's ``n_trials``).
        n_jobs: trials at once (null: the space's ``n_jobs``; ``auto``: as cores allow).
        storage: the study's storage (``--storage``: a database URL or a journal file path;
            null: see :func:`~border_py.tuning.storage.locate`).
    """

    def __init__(
        self,
        space: SearchSpace,
        study_dir: Path,
        overrides: list[str],
        entries: list[str],
        n_trials: int | None = None,
        n_jobs: int | str | None = None,
        storage: str | None = None,
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
        self.storage = locate(study_dir, storage)
        present(study_dir / TRIALS, directory=True)  # trial dirs never made through a link

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
            storage=open_storage(self.storage),
            sampler=optuna.samplers.RandomSampler(),  # creates trials only: each process samples
            direction="maximize",
            load_if_exists=True,
        )
        self.refuse_other_studies_trials(study)
        log.info(
            "study %s (%d trials so far) in %s, stored in %s: %d trials, %d at once",
            self.space.study_name,
            len(study.trials),
            self.study_dir,
            redact_text(self.storage),
            self.n_trials,
            self.n_jobs,
        )
        ctx = multiprocessing.get_context("spawn")
        running: dict[int, Any] = {}
        launched, stopping = 0, False
        with StopSignals.acquire() as signals:
            try:
                while running or (launched < self.n_trials and not stopping):
                    stopping = stopping or signals.requested
                    while not stopping and launched < self.n_trials and len(running) < self.n_jobs:
                        number, process = self.launch(study, ctx)
                        running[number] = process
                        launched += 1
                    wait([p.sentinel for p in running.values()], timeout=POLL_SECONDS)
                    for number, process in list(running.items()):
                        if process.exitcode is not None:
                            del running[number]
                            self.finished(study, number, process.exitcode)
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

    def refuse_other_studies_trials(self, study: Any) -> None:
        """Refuse a study dir whose ``trials/`` holds a run dir of a trial this study does not
        have (another study's, e.g. of another ``--storage``): its trials would reuse them.

        A trial is created before its run dir (:meth:`launch`), so the dirs are listed first."""
        folder = self.study_dir / TRIALS
        listed = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        numbers = {str(t.number) for t in study.get_trials(deepcopy=False)}
        others = sorted((n for n in listed if n not in numbers), key=lambda n: (len(n), n))
        if others:
            raise ConfigError(
                f"--study-dir {self.study_dir}: trials/{others[0]} is not a trial of study"
                f" {self.space.study_name} in {redact_text(self.storage)} (another study's run"
                " dirs are there): give each study its own --study-dir"
            )

    def launch(self, study: Any, ctx: Any) -> tuple[int, Any]:
        """Create a trial (RUNNING, with its run dir) and start its process; return both. A
        trial whose process could not start is marked FAIL."""
        import optuna

        trial = study.ask()
        try:
            run_dir = make_dir(self.study_dir / TRIALS / str(trial.number))  # never a symlink
            trial.set_user_attr("run_dir", str(run_dir))
            process = ctx.Process(
                target=run_trial, args=(self.task(trial, run_dir),), name=f"trial-{trial.number}"
            )
            process.start()
        except BaseException:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        return trial.number, process

    def task(self, trial: Any, run_dir: Path) -> TrialTask:
        """The instructions of the process that runs ``trial``."""
        return TrialTask(
            trial_id=trial._trial_id,  # Optuna's id of it in the storage: Trial(study, id)
            number=trial.number,
            run_dir=str(run_dir),
            storage=self.storage,
            study_name=self.space.study_name,
            sampler=self.space.sampler,
            pruner=self.space.pruner,
            overrides=self.overrides,
            params=self.space.params,
            entries=self.entries,
        )

    def terminate(self, study: Any, running: dict[int, Any]) -> None:
        """Stop the running trial processes (SIGTERM: a graceful stop, then SIGKILL)."""
        for process in running.values():
            process.terminate()
        for number, process in running.items():
            process.join(timeout=STOP_SECONDS)
            if process.is_alive():
                process.kill()
                process.join(timeout=10)
            self.finished(study, number, process.exitcode)

    def finished(self, study: Any, number: int, exitcode: int | None) -> None:
        """Log a trial's outcome; a trial its process left RUNNING (it died, or was stopped
        before it recorded one) is marked FAIL."""
        import optuna

        trial = study.tell(number, state=optuna.trial.TrialState.FAIL, skip_if_finished=True)
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
        """``best.yaml``: see :func:`~border_py.tuning.best.best_record`."""
        record = best_record(study, self.storage, self.overrides, self.entries)
        write_file(self.study_dir / BEST_FILE, yaml.safe_dump(record, sort_keys=False).encode())


def tune(
    space_name: str,
    overrides: list[str],
    config_dirs: list[str],
    study_dir: Path | None = None,
    n_trials: int | None = None,
    n_jobs: int | str | None = None,
    storage: str | None = None,
) -> int:
    """Run (or continue) a search; return the exit status (see :class:`Tuner` for the
    arguments)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    entries = search_path(config_dirs)
    space = load_space(space_name, entries)
    where = (study_dir or Path("outputs") / "tune" / space.study_name).expanduser().resolve()
    return Tuner(space, where, overrides, entries, n_trials, n_jobs, storage).run()
