"""``train(cfg)``: the importable training entry point behind ``border train``, resume included."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.types import OverrideType
from omegaconf import DictConfig, OmegaConf

from border_py.agents.networks import resolve_device
from border_py.checkpoint import Checkpoint, load_checkpoint, run_dir_of_checkpoint
from border_py.components import Components
from border_py.config import (
    GROUPS,
    OVERLAYS,
    ConfigError,
    build,
    flag,
    parse_overrides,
    positive,
    require,
    set_key,
    to_plain,
)
from border_py.results import OBJECTIVES, objective_value, write_result
from border_py.trainers.common import build_recorder, restore_agent

log = logging.getLogger(__name__)

NOT_CARRIED = ("resume", "run_dir")  # keys of a new invocation, never taken from the saved config


def run_dir_of(config: dict[str, Any]) -> Path:
    """``config['run_dir']`` if set, else Hydra's output dir of the current job."""
    if config.get("run_dir"):
        return Path(config["run_dir"]).resolve()
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir).resolve()
    raise ConfigError("run_dir: not set and no Hydra run dir is active (set run_dir=<path>)")


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


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out |= _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    return out


def resumed_config(checkpoint: Checkpoint, overrides: list[str]) -> dict[str, Any]:
    """The checkpoint's saved config with the command line's ``key=value`` overrides on top.

    Config groups cannot change on resume (the state would not fit); every difference is logged.
    """
    saved = {k: v for k, v in checkpoint.config.items() if k not in NOT_CARRIED}
    merged = OmegaConf.create(saved)
    parsed = parse_overrides(overrides)
    for ov in parsed:
        key = ov.key_or_group
        if key in NOT_CARRIED or key.startswith("hydra"):
            continue
        if key in GROUPS or key in OVERLAYS:
            raise ConfigError(
                f"{key}={ov.get_value_element_as_str()}: config groups cannot change when resuming;"
                f" override keys instead (e.g. trainer.max_opts=...)"
            )
        if ov.is_sweep_override():
            raise ConfigError(f"{key}: sweeps cannot resume a run")
        if ov.type is OverrideType.DEL:
            raise ConfigError(f"~{key}: keys cannot be deleted when resuming")
        set_key(merged, key, ov.value(), add=ov.type is not OverrideType.CHANGE)
    config = to_plain(merged)
    before, after = _flatten(saved), _flatten(config)
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            log.info("resume: %s changed from %r to %r", key, before.get(key), after.get(key))
    return config | {
        "resume": str(checkpoint.path),
        "run_dir": str(run_dir_of_checkpoint(checkpoint.path)),
    }


def command_line_overrides() -> list[str]:
    """The overrides of the current Hydra job (empty outside Hydra)."""
    if HydraConfig.initialized():
        return list(HydraConfig.get().overrides.task)
    return []


def _get(config: dict[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def check_fits(checkpoint: Checkpoint, config: dict[str, Any]) -> None:
    """Refuse resume overrides that the checkpoint's state cannot follow."""
    fixed = ["agent.n_step", "replay_buffer.frame_stack"]  # pending windows, stored frames
    if "sampler" in checkpoint.trainer_state:  # serial: the saved envs are restored one by one
        fixed += ["actor_manager.n_envs_per_actor", "replay_buffer.priority_from_actors"]
    for key in fixed:
        before, after = _get(checkpoint.config, key), _get(config, key)
        if before != after:
            raise ConfigError(
                f"{key}={after}: cannot change when resuming (the checkpoint has {before})"
            )
    if checkpoint.meta.get("replay_buffer"):
        size = int(checkpoint.trainer_state["replay"]["size"])
        capacity = _get(config, "replay_buffer.capacity")
        require(
            "replay_buffer.capacity",
            capacity >= size,
            f">= {size}, the transitions the checkpoint holds",
            capacity,
        )
        saved = _get(checkpoint.config, "replay_buffer.capacity")
        if _get(config, "replay_buffer.frame_stack") and capacity < saved:
            raise ConfigError(
                f"replay_buffer.capacity={capacity}: must stay >= {saved} when resuming with saved"
                " frames (their ring is sized from the capacity)"
            )


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


def train(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None) -> dict[str, Any]:
    """Train the agent the config describes; return the run summary (``best_return`` first).

    Args:
        cfg: the composed ``train`` config (a DictConfig from Hydra, or the same as plain data).
            With ``resume=<run or checkpoint dir>``, the run continues in its own run dir from
            its saved config.
        overrides: for a resume, the ``key=value`` changes to the saved config (default: the
            current Hydra job's command-line overrides).

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
        summary = plan.trainer.run(plan.config, run_dir, plan.checkpoint)
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
