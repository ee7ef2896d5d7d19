"""``train(cfg)``: the importable training entry point behind ``border train``, resume included."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from border_py.agents.networks import resolve_device
from border_py.config import build, flag, positive, require
from border_py.errors import ConfigError
from border_py.overrides import to_plain
from border_py.runs.checkpoint import Checkpoint, load_checkpoint, run_dir_of_checkpoint
from border_py.runs.results import OBJECTIVES, objective_value, write_result
from border_py.runs.resume import check_fits, resumed_config
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
    is_int = isinstance(seed, int) and not isinstance(seed, bool)
    require("seed", is_int and seed >= 0, "a non-negative int", seed)
    resolve_device(str(config.get("device")))
    objective = config.get("objective", "best")
    require("objective", objective in OBJECTIVES, f"one of {', '.join(OBJECTIVES)}", objective)
    progress = config.get("progress", True)
    flag("progress", progress)
    positive("progress_interval", config.get("progress_interval", 30))
    build_recorder(config)  # settings only: nothing is opened or written
    trainer = build("trainer", config["trainer"])
    return trainer, trainer.check(config)


@dataclass
class Plan:
    """A validated run, ready to start."""

    trainer: Any
    config: dict[str, Any]
    checkpoint: Checkpoint | None

    def run_dir(self) -> Path:
        """A resumed run's own dir, else ``run_dir`` or Hydra's output dir."""
        if self.checkpoint is not None:
            return run_dir_of_checkpoint(self.checkpoint.path)
        return run_dir_of(self.config)


def prepare(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None) -> Plan:
    """Validate ``cfg`` (for a resume: load the checkpoint and apply ``overrides`` to its config).

    Raises :class:`ConfigError` (one line) for any bad input, before anything is written.
    """
    config = to_plain(cfg)
    checkpoint = None
    if config.get("resume"):
        checkpoint = load_checkpoint(config["resume"])
        config = resumed_config(
            checkpoint, command_line_overrides() if overrides is None else overrides
        )
    trainer, parts = check(config)
    if checkpoint is not None:
        done = int(checkpoint.trainer_state["opt_steps"])
        require(
            "trainer.max_opts",
            trainer.max_opts > done,
            f"> {done}, the opt steps {checkpoint.path} already has (raise it to continue)",
            trainer.max_opts,
        )
        check_fits(checkpoint, config)
        restore_agent(parts, checkpoint)  # does the saved state fit the agent?
    return Plan(trainer, config, checkpoint)


def train(
    cfg: DictConfig | dict[str, Any],
    overrides: list[str] | None = None,
    on_eval: EvalCallback | None = None,
) -> dict[str, Any]:
    """Train the agent the config describes; return the run summary (``best_return`` first).

    Args:
        cfg: the composed ``train`` config (a DictConfig from Hydra, or the same as plain data).
            With ``resume=<run or checkpoint dir>``, the run continues in its own run dir from
            its saved config.
        overrides: for a resume, the ``key=value`` changes to the saved config (default: the
            current Hydra job's command-line overrides).
        on_eval: called after each evaluation with (opt steps, env steps, ``eval/return_mean``);
            returning True stops the run gracefully (e.g. a tuner pruning a trial).

    Returns:
        The run summary: ``objective`` (the value a sweeper optimizes, per the ``objective`` key),
        ``best_return``/``final_return``/``mean_return`` (None before any evaluation), opt and env
        steps, seconds, ``solved_at``, ``interrupted``; it is also written to ``result.json``.

    Raises:
        ConfigError: a bad setting, raised before any training starts.
    """
    plan = prepare(cfg, overrides)
    run_dir = plan.run_dir()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: one thread is as fast and leaves cores to the envs
    log.info("run dir: %s", run_dir)
    given = command_line_overrides() if overrides is None else overrides
    try:
        summary = plan.trainer.run(plan.config, run_dir, plan.checkpoint, on_eval)
    except BaseException as exc:
        if run_dir.is_dir():
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            write_result(run_dir, status, error=exc, overrides=given)
        raise
    finally:
        torch.set_num_threads(threads)
    summary["objective"] = objective_value(summary, plan.config.get("objective", "best"))
    status = "interrupted" if summary["interrupted"] else "completed"
    write_result(run_dir, status, summary, overrides=given)
    log.info("done: %s", summary)
    return summary
