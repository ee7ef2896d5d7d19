"""``train(cfg)``: the importable training entry point behind ``border train``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from border_py.agents.networks import resolve_device
from border_py.config import ConfigError, build, require, to_plain

log = logging.getLogger(__name__)


def run_dir_of(config: dict[str, Any]) -> Path:
    """``config['run_dir']`` if set, else Hydra's output dir of the current job."""
    if config.get("run_dir"):
        return Path(config["run_dir"]).resolve()
    if HydraConfig.initialized():
        return Path(HydraConfig.get().runtime.output_dir).resolve()
    raise ConfigError("run_dir: not set and no Hydra run dir is active (set run_dir=<path>)")


def check(config: dict[str, Any]) -> Any:
    """Validate the whole resolved config (top-level keys, every group, cross-field rules).

    Builds the trainer and the learner-side components without starting anything; returns the
    trainer. Raises :class:`ConfigError` with one line naming the bad key.
    """
    require(
        "seed",
        isinstance(config.get("seed"), int) and not isinstance(config["seed"], bool),
        "an int",
        config.get("seed"),
    )
    resolve_device(str(config.get("device")))
    trainer = build("trainer", config["trainer"])
    trainer.check(config)
    return trainer


def train(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """Train the agent the config describes; return the run summary (``best_return`` first).

    Args:
        cfg: the composed ``train`` config (a DictConfig from Hydra, or the same as plain data).

    Raises:
        ConfigError: a bad setting, raised before any training starts.
    """
    config = to_plain(cfg)
    trainer = check(config)
    run_dir = run_dir_of(config)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small networks: one thread is as fast and leaves cores to the envs
    log.info("run dir: %s", run_dir)
    try:
        summary = trainer.run(config, run_dir)
    finally:
        torch.set_num_threads(threads)
    log.info("done: %s", summary)
    return summary
