"""Learner-side pieces every trainer shares: loop settings and run bookkeeping."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from border_py import __version__
from border_py.agents.base import Agent
from border_py.checkpoint import (
    Checkpoint,
    prune,
    recover,
    save_checkpoint,
    set_aside_newer,
    step_name,
)
from border_py.components import Components, build_components
from border_py.config import ConfigError, non_negative, positive, require
from border_py.evaluator import EvalResult
from border_py.recorder import TensorBoardRecorder

log = logging.getLogger(__name__)


@dataclass
class LoopSettings:
    """Settings every trainer shares (border's names and semantics).

    Args:
        max_opts: optimization steps of the run.
        warmup_period: transitions collected before the first optimization step.
        eval_interval: opt steps between evaluations.
        eval_episodes: episodes per evaluation.
        eval_max_steps: step cap of an evaluation episode.
        record_interval: opt steps between training scalars.
        save_interval: opt steps between periodic checkpoints (0 disables them; a final
            checkpoint is always written).
        keep_checkpoints: periodic checkpoints kept, newest first (``best`` is always kept).
        save_replay_buffer: put the replay buffer into periodic and final checkpoints.
        target_return: stop early once ``eval/return_mean`` reaches it (None: never).
    """

    max_opts: int
    warmup_period: int = 1000
    eval_interval: int = 1000
    eval_episodes: int = 10
    eval_max_steps: int = 10000
    record_interval: int = 100
    save_interval: int = 10000
    keep_checkpoints: int = 3
    save_replay_buffer: bool = False
    target_return: float | None = None

    def __post_init__(self) -> None:
        positive("max_opts", self.max_opts, int)
        non_negative("warmup_period", self.warmup_period)
        positive("eval_interval", self.eval_interval, int)
        positive("eval_episodes", self.eval_episodes, int)
        positive("eval_max_steps", self.eval_max_steps, int)
        positive("record_interval", self.record_interval, int)
        non_negative("save_interval", self.save_interval)
        positive("keep_checkpoints", self.keep_checkpoints, int)
        require(
            "save_replay_buffer",
            isinstance(self.save_replay_buffer, bool),
            "true or false",
            self.save_replay_buffer,
        )
        target = self.target_return
        number = isinstance(target, (int, float)) and not isinstance(target, bool)
        require("target_return", target is None or number, "null or a number", target)

    def check(self, config: dict[str, Any]) -> Components:
        """Validate the config's components against these settings without training; return them."""
        return build_components(config, self.warmup_period)


def learn_step(agent: Agent, buffer: Any) -> dict[str, Any]:
    """One optimization step: sample a batch from the replay buffer, update the agent on it.

    Every trainer optimizes through this function, so what a step involves (sampling, the update,
    anything the buffer needs back from it) is defined once.
    """
    metrics = agent.update(buffer.sample(agent.batch_size))
    metrics.pop("td_error", None)  # per-sample TD errors are for a prioritized buffer, not scalars
    return metrics


def restore_agent(parts: Components, checkpoint: Checkpoint) -> None:
    """Load a checkpoint's agent state, or explain in one line why it does not fit the config."""
    spaces = parts.env_factory.spaces()
    saved = checkpoint.meta.get("spaces", {})
    for name, space in zip(("observation_space", "action_space"), spaces, strict=True):
        if saved.get(name) not in (None, str(space)):
            raise ConfigError(
                f"{checkpoint.path}: its {name} {saved[name]} does not match the env's {space}"
            )
    try:
        parts.agent.load_state_dict(checkpoint.agent_state)
    except (RuntimeError, KeyError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"{checkpoint.path}: does not fit the agent config ({first})") from None


class RunBook:
    """Run bookkeeping shared by trainers: recording, evaluations, best and periodic checkpoints.

    Args:
        run_dir: the run directory.
        config: the resolved config (recorded as text, saved into checkpoints).
        loop: the loop settings.
        spaces: the env's (observation, action) spaces, saved into checkpoints' meta.
        resume: the checkpoint a resumed run continues from (TensorBoard then continues after its
            opt steps, and the best return so far carries over).
    """

    def __init__(
        self,
        run_dir: Path,
        config: dict[str, Any],
        loop: LoopSettings,
        spaces: tuple[Any, Any],
        resume: Checkpoint | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.checkpoints = self.run_dir / "checkpoints"
        self.config = config
        self.loop = loop
        self.spaces = {"observation_space": str(spaces[0]), "action_space": str(spaces[1])}
        self.best_return = float("-inf")
        self.seconds_before = 0.0
        recover(self.checkpoints)
        if resume is not None:
            for path in set_aside_newer(self.checkpoints, int(resume.trainer_state["opt_steps"])):
                log.warning("resuming from an older checkpoint: moved %s aside", path)
        if resume is None:
            self.recorder = TensorBoardRecorder(self.run_dir)
            self.recorder.config(config)
        else:
            state = resume.trainer_state
            self.best_return = float(state["best_return"])
            self.seconds_before = float(state.get("seconds", 0.0))
            # events at later steps (written after this checkpoint, before a crash) are discarded
            self.recorder = TensorBoardRecorder(
                self.run_dir, purge_step=int(state["opt_steps"]) + 1
            )
        self.solved_at: dict[str, float] | None = None
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        """Training seconds so far, earlier sessions of a resumed run included."""
        return self.seconds_before + time.perf_counter() - self.start

    def on_eval(
        self,
        result: EvalResult,
        opt_steps: int,
        env_steps: int,
        policy: dict[str, torch.Tensor],
        agent_state: dict[str, Any],
        trainer_state: Callable[[], dict[str, Any]],
    ) -> None:
        """Record an evaluation of the weights of ``opt_steps``; save ``best`` if it is a new best.

        ``policy``, ``agent_state`` and ``trainer_state()`` describe the run at ``opt_steps``.
        """
        self.recorder.scalars(result.scalars(), opt_steps)
        new_best = result.return_mean > self.best_return
        if new_best:
            self.best_return = result.return_mean
            self._write(
                "best",
                opt_steps,
                env_steps,
                policy,
                agent_state,
                trainer_state(),
                None,
                {"eval": result.scalars()},
            )
        target = self.loop.target_return
        if target is not None and self.solved_at is None and result.return_mean >= target:
            self.solved_at = {
                "opt_steps": opt_steps,
                "env_steps": env_steps,
                "seconds": self.elapsed(),
            }
        log.info(
            "opt %d | env steps %d | eval return %.1f ± %.1f (min %.1f, max %.1f)%s | %.0fs",
            opt_steps,
            env_steps,
            result.return_mean,
            result.return_std,
            result.return_min,
            result.return_max,
            " | new best" if new_best else "",
            self.elapsed(),
        )

    def save(
        self,
        opt_steps: int,
        env_steps: int,
        agent: Agent,
        trainer_state: dict[str, Any],
        buffer: dict[str, Any] | None,
    ) -> Path:
        """A checkpoint of the run as it is now, ``checkpoints/<opt_steps:09d>/``; older ones pruned.

        ``buffer`` (the replay buffer's arrays) is written when ``save_replay_buffer`` is on.
        """
        path = self._write(
            step_name(opt_steps),
            opt_steps,
            env_steps,
            agent.policy_state(),
            agent.state_dict(),
            trainer_state,
            buffer if self.loop.save_replay_buffer else None,
            {},
        )
        prune(self.checkpoints, self.loop.keep_checkpoints)
        return path

    def _write(
        self,
        name: str,
        opt_steps: int,
        env_steps: int,
        policy: dict[str, torch.Tensor],
        agent_state: dict[str, Any],
        trainer_state: dict[str, Any],
        buffer: dict[str, Any] | None,
        extra: dict[str, Any],
    ) -> Path:
        meta = {
            "opt_steps": opt_steps,
            "env_steps": env_steps,
            "best_return": self.best_return,
            "seconds": round(self.elapsed(), 3),
            "spaces": self.spaces,
            "replay_buffer": buffer is not None,
            "border_py": __version__,
        } | extra
        state = trainer_state | {"best_return": self.best_return, "seconds": self.elapsed()}
        return save_checkpoint(
            self.checkpoints,
            name,
            policy=policy,
            agent_state=agent_state,
            trainer_state=state,
            config=self.config,
            meta=meta,
            buffer=buffer,
        )

    def close(self) -> None:
        """Flush and close the recorder (idempotent)."""
        self.recorder.close()
