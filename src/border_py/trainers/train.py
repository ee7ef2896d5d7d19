"""``train(cfg)``: the importable training entry point behind ``border train``, resume included."""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from threadpoolctl import threadpool_limits

from border_py.callbacks import Callback, Callbacks, EvalFunction, OnEval, build_callbacks
from border_py.config import GROUPS, build
from border_py.errors import ConfigError
from border_py.files import LogFile
from border_py.layout import HYDRA, LOG
from border_py.overrides import to_plain
from border_py.processes.signals import StopSignals
from border_py.recorders.composite import build_recorders
from border_py.recorders.console import PLAIN_FORMAT, summary_table
from border_py.runs.checkpoint import Checkpoint
from border_py.runs.compat import complete
from border_py.runs.session import RunSession
from border_py.runs.settings import RunSettings
from border_py.secrets import RedactingFormatter
from border_py.trainers.components import Components
from border_py.trainers.settings import LoopSettings
from border_py.trainers.trainer import Trainer

__all__ = ["prepare", "run_log", "train"]

log = logging.getLogger(__name__)

# the groups a config needs (``recorder`` may be absent: TensorBoard's, see build_recorders)
NEEDED_GROUPS = tuple(group for group in GROUPS if group != "recorder")


def run_dir_of(run: RunSettings) -> Path:
    """The settings' ``run_dir`` if set, else Hydra's output dir of the current job."""
    if run.run_dir:
        return Path(run.run_dir).resolve()
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir).resolve()
    raise ConfigError("run_dir: not set and no Hydra run dir is active (set run_dir=<path>)")


def launcher_files() -> tuple[str, ...]:
    """What Hydra writes into a job's dir before the job's code runs (its ``.hydra/`` and
    ``train.log``): kept in place when a fresh attempt sets an earlier one's files aside."""
    return (HYDRA, LOG) if HydraConfig.initialized() else ()


def command_line_overrides() -> list[str]:
    """The overrides of the current Hydra job (empty outside Hydra)."""
    if HydraConfig.initialized():
        return list(HydraConfig.get().overrides.task)
    return []


def check(config: dict[str, Any], run: RunSettings) -> tuple[Trainer, Components, list[Callback]]:
    """Validate the whole resolved config (every group, cross-field rules; ``run``: its own keys,
    already read by :meth:`RunSettings.of <border_py.runs.settings.RunSettings.of>`).

    Builds the trainer, the learner-side components and the ``callbacks`` without starting
    anything; returns them. Raises :class:`ConfigError` with one line naming the bad key (or the
    first missing group).
    """
    missing = [group for group in NEEDED_GROUPS if group not in config]
    if missing:
        raise ConfigError(
            f"{missing[0]}: missing from the config (a config needs the groups"
            f" {', '.join(NEEDED_GROUPS)}: compose it from conf/train.yaml, see README"
            ' "From Python")'
        )
    build_recorders(config.get("recorder"))  # settings only: nothing is opened or written
    callbacks = build_callbacks(list(run.callbacks))
    settings = build("trainer", config["trainer"])
    if not isinstance(settings, LoopSettings):
        raise ConfigError(
            f"trainer._target_={config['trainer'].get('_target_')}: not a trainer's settings (see"
            " border_py.trainers.settings.LoopSettings)"
        )
    trainer = Trainer(settings)
    return trainer, trainer.check(config, run), callbacks


@dataclass
class Plan:
    """A validated run, ready to start."""

    trainer: Trainer
    config: dict[str, Any]
    run: RunSettings  # the config's own keys (train.yaml's), read once
    checkpoint: Checkpoint | None
    parts: Components  # built once, while validating: the run uses them
    callbacks: list[Callback]  # the config's


def prepare(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None) -> Plan:
    """Validate ``cfg`` (for a resume: load the checkpoint and apply ``overrides`` to its config)
    as a session of it would, on the session's own route but without entering it: nothing is
    locked, moved or written.

    Raises :class:`ConfigError` (one line) for any bad input.
    """
    given = command_line_overrides() if overrides is None else overrides
    config = complete(to_plain(cfg))
    run = RunSession(config, RunSettings.of(config), given, None)
    run.resolve()
    trainer, parts, callbacks = validated(run)
    return Plan(trainer, run.config, run.settings, run.checkpoint, parts, callbacks)


def validated(run: RunSession) -> tuple[Trainer, Components, list[Callback]]:
    """The session's config :func:`check`-ed, then a resumed run's checkpoint checked against it
    and its agent state loaded (:meth:`~border_py.runs.session.RunSession.fits`)."""
    trainer, parts, callbacks = check(run.config, run.settings)
    loop = trainer.settings
    run.fits(parts.agent, parts.env_factory.spaces(), loop.max_opts, loop.max_env_steps)
    return trainer, parts, callbacks


def train(
    cfg: DictConfig | dict[str, Any],
    overrides: list[str] | None = None,
    on_eval: EvalFunction | None = None,
    callbacks: Sequence[Callback] = (),
) -> dict[str, Any]:
    """Train the agent the config describes; return the run summary (``best_return`` first).

    A session of the run (:class:`~border_py.runs.session.RunSession`): a fresh run claims its
    run dir (``run_dir``, else Hydra's output dir; a dir that holds an earlier run is refused);
    ``resume=`` continues a run in its own dir. The run's log goes to ``<run dir>/train.log``
    (also when called from Python). The first SIGINT/SIGTERM from the moment this is called asks
    for a graceful stop (a final checkpoint if an opt step was made); a second one, 0.5 s or
    more later, raises ``KeyboardInterrupt``.

    Args:
        cfg: the composed ``train`` config (a DictConfig from Hydra, or the same as plain data).
            With ``resume=<run or checkpoint dir>`` (or ``auto``), the run continues from its
            saved config.
        overrides: for a resume, the ``key=value`` changes to the saved config; for a fresh run,
            the overrides its claim records (default: the current Hydra job's command line).
        on_eval: called after each evaluation with (opt steps, env steps, ``eval/return_mean``);
            returning True stops the run gracefully (e.g. a tuner pruning a trial).
        callbacks: hooks into the run, after the config's ``callbacks`` (:mod:`~border_py.callbacks`).

    Returns:
        The run summary (also in ``result.json``): ``objective`` (per the ``objective`` key),
        ``best_return``/``final_return``/``mean_return`` of the selection evaluations (None before
        any) and their ``selection_episodes``, ``final_eval``/``best_eval`` (the final weights and
        the best checkpoint on fresh episodes, see ``trainer.final_eval_episodes``), opt and env
        steps, samples, seconds, ``solved_at``, ``interrupted``, ``stopped_by_callback``, this
        session's ``opt_steps_per_sec``, the transition ``accounting`` and ``restarts``.

    Raises:
        ConfigError: a bad setting, raised before any training starts.
        CallbackError: a callback raised (one line; see :mod:`~border_py.callbacks`).
    """
    refuse_in_child_bootstrap()
    config = complete(to_plain(cfg))  # a key it lacks: its shipped value (conf/)
    command = RunSettings.of(config)  # train.yaml's own keys, read once (a resume's: below)
    given = command_line_overrides() if overrides is None else overrides
    session = RunSession(config, command, given, _run_dir_or_none(command), launcher_files())
    with StopSignals.acquire() as signals, session as run:
        if run.completed is not None:  # resume=auto: the run has completed, nothing to do
            return run.completed
        trainer, parts, configured = validated(run)
        hooks = Callbacks([*configured, *callbacks, *([OnEval(on_eval)] if on_eval else [])])
        run_dir = run.start()
        with run_log(run_dir):
            log.info("run dir: %s", run_dir)
            run.repair()  # what it moves aside is logged into train.log
            with learner_cpu():
                summary = trainer.run(
                    run.config, run.settings, parts, run_dir, run.checkpoint, signals, hooks
                )
            summary = run.objective(summary)
            log.info("run summary:\n%s", summary_table(summary))  # before: a full disk keeps it
            run.finish(summary)
            hooks.on_stop(summary)
            return summary


@contextlib.contextmanager
def learner_cpu() -> Iterator[None]:
    """The learner's CPU settings for the run, the previous ones back after it.

    - torch and numpy's BLAS on one thread (small networks: as fast, and it leaves the cores to
      the envs and the actors);
    - float denormals flushed to zero (``torch.set_flush_denormal``): Adam's first moments of
      gradients that stay zero decay below float32's smallest normal number, where x86
      arithmetic takes a slow path (learning MinAtar Breakout, a third of them; the update 1.11x
      as long: ``benchmarks/denormals_bench.py``). After the run the flag is off again, torch's
      default (torch cannot tell what it was before).
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    blas = threadpool_limits(limits=1, user_api="blas")  # numpy's too (the serial trainer acts)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.set_flush_denormal(False)
        blas.restore_original_limits()


def _run_dir_or_none(run: RunSettings) -> Path | None:
    try:
        return run_dir_of(run)
    except ConfigError:
        return None


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
    path = run_dir.resolve() / LOG
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
