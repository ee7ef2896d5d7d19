"""The serial trainer: one process samples, optimizes, evaluates and saves, in border's loop order.

It runs the same sampler and agent code as the async trainer's actors and learner, which makes it
the debugging and testing mode of the async trainer.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from border_py.components import build_components
from border_py.config import positive
from border_py.evaluator import Evaluator
from border_py.lifecycle import StopSignals
from border_py.sampler import Sampler, SampleStats, episode_summary
from border_py.seeding import derive_seed
from border_py.trainers.common import LoopSettings, RunBook

log = logging.getLogger(__name__)


class SerialTrainer(LoopSettings):
    """Per env step: sample and push; then the opt steps now due; then eval/save when due.

    Opt steps become due once ``warmup_period`` env steps are collected, one every
    ``opt_interval`` env steps after that.

    Args:
        opt_interval: env steps per optimization step (0.5 = two opt steps per env step).
        Others: see :class:`LoopSettings`.
    """

    def __init__(
        self,
        max_opts: int,
        opt_interval: float = 1,
        warmup_period: int = 1000,
        eval_interval: int = 1000,
        eval_episodes: int = 10,
        eval_max_steps: int = 10000,
        record_interval: int = 100,
        save_interval: int = 10000,
        target_return: float | None = None,
    ) -> None:
        super().__init__(
            max_opts,
            warmup_period,
            eval_interval,
            eval_episodes,
            eval_max_steps,
            record_interval,
            save_interval,
            target_return,
        )
        positive("opt_interval", opt_interval)
        self.opt_interval = opt_interval

    def run(self, config: dict[str, Any], run_dir: Path) -> dict[str, Any]:
        """Train with the resolved ``config``, writing artifacts into ``run_dir``; return a summary."""
        parts = build_components(config, self.warmup_period)
        agent, buffer = parts.agent, parts.buffer
        seed = config["seed"]
        sampler = Sampler(
            parts.env_factory,
            agent,
            parts.actors.n_envs_per_actor,
            derive_seed(seed, "actor", 0, "env"),
        )
        evaluator = Evaluator(
            parts.env_factory, self.eval_episodes, derive_seed(seed, "eval"), self.eval_max_steps
        )
        book = RunBook(run_dir, config, self)
        stats = SampleStats()
        opt_steps, last_saved = 0, -1
        window_start, window_env, window_opt = time.perf_counter(), 0, 0
        signals = StopSignals().install()
        try:
            while opt_steps < self.max_opts and book.solved_at is None and not signals.requested:
                batch = sampler.step(stats)
                if batch is not None:
                    buffer.push(batch)
                if stats.env_steps < self.warmup_period:
                    continue
                due = min(
                    self.max_opts,
                    math.floor((stats.env_steps - self.warmup_period) / self.opt_interval) + 1,
                )
                while opt_steps < due and book.solved_at is None and not signals.requested:
                    metrics = agent.update(buffer.sample(agent.batch_size))
                    opt_steps += 1
                    if opt_steps % self.record_interval == 0:
                        now = time.perf_counter()
                        seconds = max(now - window_start, 1e-9)
                        book.recorder.scalars(
                            metrics
                            | agent.exploration_stats()
                            | episode_summary(stats.episode_returns, stats.episode_lengths)
                            | {
                                "perf/env_steps": stats.env_steps,
                                "perf/env_steps_per_sec": (stats.env_steps - window_env) / seconds,
                                "perf/opt_steps_per_sec": (opt_steps - window_opt) / seconds,
                                "buffer/size": len(buffer),
                            },
                            opt_steps,
                        )
                        stats.episode_returns, stats.episode_lengths = [], []
                        window_start, window_env, window_opt = now, stats.env_steps, opt_steps
                    if opt_steps % self.eval_interval == 0:
                        book.on_eval(
                            evaluator.evaluate(agent),
                            opt_steps,
                            stats.env_steps,
                            agent.policy_state(),
                            agent,
                        )
                    if self.save_interval and opt_steps % self.save_interval == 0:
                        book.save(opt_steps, stats.env_steps, agent)
                        last_saved = opt_steps
            if opt_steps != last_saved:
                book.save(opt_steps, stats.env_steps, agent)
        finally:
            signals.restore()
            sampler.close()
            evaluator.close()
            book.close()
        return {
            "best_return": book.best_return,
            "opt_steps": opt_steps,
            "env_steps": stats.env_steps,
            "seconds": book.elapsed(),
            "solved_at": book.solved_at,
            "interrupted": signals.requested,
        }
