"""Learner-side pieces every trainer shares: building components and run bookkeeping."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from border_py.agents.base import Agent
from border_py.checkpoint import save_checkpoint, step_name
from border_py.components import build_components
from border_py.config import non_negative, positive
from border_py.evaluator import EvalResult
from border_py.recorder import TensorBoardRecorder

log = logging.getLogger(__name__)


class LoopSettings:
    """Settings every trainer shares (border's names and semantics).

    Args:
        max_opts: optimization steps of the run.
        warmup_period: transitions collected before the first optimization step.
        eval_interval: opt steps between evaluations.
        eval_episodes: episodes per evaluation.
        eval_max_steps: step cap of an evaluation episode.
        record_interval: opt steps between training scalars.
        save_interval: opt steps between periodic checkpoints (0 disables them).
        target_return: stop early once ``eval/return_mean`` reaches it (None: never).
    """

    def __init__(
        self,
        max_opts: int,
        warmup_period: int = 1000,
        eval_interval: int = 1000,
        eval_episodes: int = 10,
        eval_max_steps: int = 10000,
        record_interval: int = 100,
        save_interval: int = 10000,
        target_return: float | None = None,
    ) -> None:
        positive("max_opts", max_opts, int)
        non_negative("warmup_period", warmup_period)
        positive("eval_interval", eval_interval, int)
        positive("eval_episodes", eval_episodes, int)
        positive("eval_max_steps", eval_max_steps, int)
        positive("record_interval", record_interval, int)
        non_negative("save_interval", save_interval)
        self.max_opts = max_opts
        self.warmup_period = warmup_period
        self.eval_interval = eval_interval
        self.eval_episodes = eval_episodes
        self.eval_max_steps = eval_max_steps
        self.record_interval = record_interval
        self.save_interval = save_interval
        self.target_return = target_return

    def check(self, config: dict[str, Any]) -> None:
        """Validate the config's components against these settings without training."""
        build_components(config, self.warmup_period)


class RunBook:
    """Run bookkeeping shared by trainers: recording, evaluation results, best and periodic checkpoints.

    Args:
        run_dir: the run directory.
        config: the resolved config (recorded as text, saved in checkpoints' meta).
        loop: the loop settings.
    """

    def __init__(self, run_dir: Path, config: dict[str, Any], loop: LoopSettings) -> None:
        self.run_dir = Path(run_dir)
        self.checkpoints = self.run_dir / "checkpoints"
        self.loop = loop
        self.recorder = TensorBoardRecorder(self.run_dir)
        self.recorder.config(config)
        self.best_return = float("-inf")
        self.solved_at: dict[str, float] | None = None
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.perf_counter() - self.start

    def on_eval(
        self, result: EvalResult, opt_steps: int, env_steps: int, policy: dict, agent_state: dict
    ) -> None:
        """Record an evaluation of the weights of ``opt_steps``; save ``best`` if it is a new best.

        ``policy`` and ``agent_state`` are the acting weights and the agent's full state at ``opt_steps``.
        """
        self.recorder.scalars(result.scalars(), opt_steps)
        new_best = result.return_mean > self.best_return
        if new_best:
            self.best_return = result.return_mean
            meta = self._meta(opt_steps, env_steps) | {"eval": result.scalars()}
            save_checkpoint(self.checkpoints, "best", policy, agent_state, meta)
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

    def save(self, opt_steps: int, env_steps: int, agent: Agent) -> Path:
        """A checkpoint of ``agent`` as it is now: ``checkpoints/<opt_steps:09d>/``."""
        return save_checkpoint(
            self.checkpoints,
            step_name(opt_steps),
            agent.policy_state(),
            agent.state_dict(),
            self._meta(opt_steps, env_steps),
        )

    def _meta(self, opt_steps: int, env_steps: int) -> dict[str, Any]:
        return {
            "opt_steps": opt_steps,
            "env_steps": env_steps,
            "best_return": self.best_return,
            "seconds": round(self.elapsed(), 3),
        }

    def close(self) -> None:
        """Flush and close the recorder (idempotent)."""
        self.recorder.close()
