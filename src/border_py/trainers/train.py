"""``train(cfg)``: the importable training entry point behind ``border train``, resume included."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from threadpoolctl import threadpool_limits

from border_py.agents.networks import resolve_device
from border_py.config import build, flag, positive, require
from border_py.errors import ConfigError, RunError
from border_py.files import LogFile
from border_py.overrides import to_plain
from border_py.processes.signals import StopSignals
from border_py.recorders.console import PLAIN_FORMAT, summary_table
from border_py.runs.checkpoint import (
    Checkpoint,
    find_checkpoint,
    load_checkpoint,
    run_dir_of_checkpoint,
)
from border_py.runs.results import (
    OBJECTIVES,
    RESULT_FILE,
    objective_value,
    read_result,
    write_result,
)
from border_py.runs.resume import check_fits, resumed_config
from border_py.runs.run_dir import RunCompleted, auto_resume, claim, session_lock
from border_py.runs.trust import Trust, check_trust_list
from border_py.secrets import RedactingFormatter
from border_py.trainers.components import Components
from border_py.trainers.run_book import EvalCallback, build_recorder, restore_agent

log = logging.getLogger(__name__)


def run_dir_of(config: dict[str, Any]) -> Path:
    """``config['run_dir']`` if set, else Hydra's output dir of the current job."""
    if config.get("run_dir"):
        return Path(config["run_dir"]).resolve()
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir).resolve()
    raise ConfigError("run_dir: not set and no Hydra run dir is active (set run_dir=<path>)")


def command_line_overrides() -> list[str]:
    """The overrides of the current Hydra job (empty outside Hydra)."""
    if HydraConfig.initialized():
        return list(HydraConfig.get().overrides.task)
    return []


def check(config: dict[str, Any]) -> tuple[Any, Components]:
    """Validate the whole resolved config (top-level keys, every group, cross-field rules).

    Builds the trainer and the learner-side components without starting anything; returns both.
    Raises :class:`ConfigError` with one line naming the bad key.
    """
    seed = config.get("seed")
    ok = isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0
    require("seed", ok, "a non-negative int", seed)
    resolve_device(str(config.get("device")))
    objective = config.get("objective", "best")
    require("objective", objective in OBJECTIVES, f"one of {', '.join(OBJECTIVES)}", objective)
    progress = config.get("progress", True)
    flag("progress", progress)
    positive("progress_interval", config.get("progress_interval", 30))
    check_trust_list(config.get("trust") or [])
    flag("check_resources", config.get("check_resources", True))
    build_recorder(config)  # settings only: nothing is opened or written
    trainer = build("trainer", config["trainer"])
    return trainer, trainer.check(config)


@dataclass
class Plan:
    """A validated run, ready to start."""

    trainer: Any
    config: dict[str, Any]
    checkpoint: Checkpoint | None
    parts: Components  # built once, while validating: the run uses them

    def run_dir(self) -> Path:
        """A resumed run's own dir, else ``run_dir`` or Hydra's output dir."""
        if self.checkpoint is not None:
            return run_dir_of_checkpoint(self.checkpoint.path)
        return run_dir_of(self.config)


def resumed_run_dir(resume: str, config: dict[str, Any]) -> Path:
    """The dir of the run that ``resume=<resume>`` continues (``auto``: the run's own dir)."""
    if resume == "auto":
        return run_dir_of(config)
    return run_dir_of_checkpoint(find_checkpoint(resume))


def settle_auto_resume(config: dict[str, Any]) -> str | None:
    """``resume=auto`` in the run's dir (``run_dir``, else Hydra's job dir: a requeued sweep job
    repeats its command line there): the checkpoint to continue from, or None to start fresh.

    Raises:
        RunCompleted: the run in that dir has completed (nothing to do).
    """
    run_dir = run_dir_of(config)
    # Hydra has already written this attempt's .hydra/ and opened its train.log in a job dir
    launcher_files = (".hydra", "train.log") if HydraConfig.initialized() else ()
    checkpoint = auto_resume(run_dir, keep=launcher_files)
    return None if checkpoint is None else str(checkpoint)


def prepare(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None) -> Plan:
    """Validate ``cfg`` (for a resume: load the checkpoint and apply ``overrides`` to its config).

    Raises :class:`ConfigError` (one line) for any bad input, before anything is written.
    """
    config = to_plain(cfg)
    checkpoint = None
    if config.get("resume"):
        checkpoint = load_checkpoint(config["resume"])
        given = command_line_overrides() if overrides is None else overrides
        config = resumed_config(checkpoint, given, Trust.of(config))
    trainer, parts = check(config)
    if checkpoint is not None:
        done = int(checkpoint.trainer_state["opt_steps"])
        done_env = int(checkpoint.trainer_state["env_steps"])
        if trainer.max_opts is not None:
            require(
                "trainer.max_opts",
                trainer.max_opts > done,
                f"> {done}, the opt steps {checkpoint.path} already has (raise it to continue)",
                trainer.max_opts,
            )
        if trainer.max_env_steps is not None:
            require(
                "trainer.max_env_steps",
                trainer.max_env_steps > done_env,
                f"> {done_env}, the env steps {checkpoint.path} already has (raise it to continue)",
                trainer.max_env_steps,
            )
        check_fits(checkpoint, config)
        restore_agent(parts, checkpoint)  # does the saved state fit the agent? (it does now)
    return Plan(trainer, config, checkpoint, parts)


def train(
    cfg: DictConfig | dict[str, Any],
    overrides: list[str] | None = None,
    on_eval: EvalCallback | None = None,
) -> dict[str, Any]:
    """Train the agent the config describes; return the run summary (``best_return`` first).

    A fresh run claims its run dir (``run_dir``, else Hydra's output dir); a dir that holds an
    earlier run is refused (see :mod:`border_py.runs.run_dir`). The run's log goes to
    ``<run dir>/train.log`` (also when called from Python). The first SIGINT/SIGTERM from the
    moment this is called asks for a graceful stop (a final checkpoint if an opt step was made);
    the second raises ``KeyboardInterrupt``.

    Args:
        cfg: the composed ``train`` config (a DictConfig from Hydra, or the same as plain data).
            With ``resume=<run or checkpoint dir>``, the run continues in its own run dir from
            its saved config.
        overrides: for a resume, the ``key=value`` changes to the saved config; for a fresh run,
            what its claim records as the overrides it started with, which later resumes
            compare their config groups with (default: the current Hydra job's command-line
            overrides).
        on_eval: called after each evaluation with (opt steps, env steps, ``eval/return_mean``);
            returning True stops the run gracefully (e.g. a tuner pruning a trial).

    Returns:
        The run summary: ``objective`` (the value a sweeper optimizes, per the ``objective`` key),
        ``best_return``/``final_return``/``mean_return`` (None before any evaluation), opt and env
        steps, samples, seconds, ``solved_at``, ``interrupted``, ``stopped_by_callback``, this
        session's ``opt_steps_per_sec``, the transition ``accounting`` and ``restarts``; it is
        also written to ``result.json``.

    Raises:
        ConfigError: a bad setting, raised before any training starts.
    """
    refuse_in_child_bootstrap()
    signals = StopSignals.acquire()
    try:
        config = to_plain(cfg)
        with contextlib.ExitStack() as held:
            resume = config.get("resume")
            if resume:  # held before the run's files are read (or, for auto, moved aside)
                held.enter_context(session_lock(resumed_run_dir(resume, config)))
            if resume == "auto":
                try:
                    config["resume"] = settle_auto_resume(config)
                except RunCompleted as done:
                    log.info("%s", done)
                    summary = dict(done.result.get("summary") or {})
                    summary["objective"] = objective_value(summary, config.get("objective", "best"))
                    return summary
            plan = prepare(config, overrides)
            run_dir = plan.run_dir()
            given = command_line_overrides() if overrides is None else overrides
            if plan.checkpoint is None:
                claim(run_dir, given)
            if not resume:
                held.enter_context(session_lock(run_dir))
            with run_log(run_dir):
                return _run(plan, run_dir, signals, given, on_eval)
    finally:
        signals.release()


def _run(
    plan: Plan,
    run_dir: Path,
    signals: StopSignals,
    given: list[str],
    on_eval: EvalCallback | None,
) -> dict[str, Any]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: one thread is as fast and leaves cores to the envs
    log.info("run dir: %s", run_dir)
    if plan.checkpoint is not None:  # the run's first overrides stay; this session's are added
        earlier = read_result(run_dir) or {}
        given = list(earlier.get("overrides", [])) + [f"(resume) {o}" for o in given]
    blas = threadpool_limits(limits=1, user_api="blas")  # numpy's too (the serial trainer acts)
    try:
        summary = plan.trainer.run(
            plan.config, plan.parts, run_dir, plan.checkpoint, signals, on_eval
        )
    except BaseException as exc:
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        try:
            write_result(run_dir, status, error=exc, overrides=given)
        except OSError as write_error:  # e.g. the disk is full: the run's own error comes first
            log.error("result.json could not be written: %s", write_error)
        raise
    finally:
        torch.set_num_threads(threads)
        blas.restore_original_limits()
    summary["objective"] = objective_value(summary, plan.config.get("objective", "best"))
    status = "interrupted" if summary["interrupted"] else "completed"
    log.info("run summary:\n%s", summary_table(summary))
    try:
        write_result(run_dir, status, summary, overrides=given)
    except OSError as exc:  # e.g. the disk is full: the checkpoints and the log have the run
        raise RunError(
            f"{run_dir / RESULT_FILE}: could not be written ({exc.strerror or exc}); the run's"
            " checkpoints are intact and its summary is in train.log"
        ) from exc
    return summary


def refuse_in_child_bootstrap() -> None:
    """End a child process that is importing the user's script and reached a call of ``train``.

    With the ``forkserver`` and ``spawn`` start methods every child process imports the main
    script first; training code outside ``if __name__ == "__main__":`` would start a run in each
    child. Say so in one line and exit (the learner then ends the run in one line too).
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        print(  # the forkserver swallows a SystemExit's message: say it here
            "border-py: train() was called while a child process imported your script: put the"
            ' training code under `if __name__ == "__main__":` (see README, "From Python")',
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1)


@contextlib.contextmanager
def run_log(run_dir: Path) -> Iterator[None]:
    """Log to ``<run dir>/train.log`` for the run (never through a symlink), unless a handler
    already writes there (Hydra's)."""
    path = run_dir.resolve() / "train.log"
    root = logging.getLogger()
    writes_there = any(
        isinstance(h, logging.FileHandler)
        and Path(h.baseFilename).parent.resolve() / Path(h.baseFilename).name == path
        for h in root.handlers
    )
    if writes_there:
        yield
        return
    handler = LogFile(path)
    handler.setFormatter(RedactingFormatter(PLAIN_FORMAT))
    previous_level = root.level
    if root.level > logging.INFO or root.level == logging.NOTSET:
        root.setLevel(logging.INFO)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous_level)
        handler.close()
