"""The serial trainer: one process samples, optimizes, evaluates and saves, in border's loop order.

It runs the same sampler and agent code as the async trainer's actors and learner, which makes it
the debugging and testing mode of the async trainer. On CPU with a fixed seed it is exactly
reproducible, across a stop and a resume too (with ``save_replay_buffer``).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from border_py.actors.sampler import Sampler, SampleStats, episode_summary, sampler_options
from border_py.config import positive
from border_py.evaluation.evaluator import Evaluator
from border_py.processes import StopSignals
from border_py.runs.checkpoint import Checkpoint
from border_py.seeding import derive_seed, global_rng_state, set_global_rng_state
from border_py.trainers.components import build_components
from border_py.trainers.run_book import EvalCallback, RunBook, learn_step, restore_agent
from border_py.trainers.settings import LoopSettings

log = logging.getLogger(__name__)


@dataclass
class SerialTrainer(LoopSettings):
    """Per env step: sample and push; then the opt steps now due; eval/save when due after each.

    Opt steps become due once ``warmup_period`` env steps are collected, one every
    ``opt_interval`` env steps after that.

    Args:
        opt_interval: env steps per optimization step (0.5 = two opt steps per env step).
        Others: see :class:`LoopSettings`.
    """

    opt_interval: float = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        positive("opt_interval", self.opt_interval)

    def run(
        self,
        config: dict[str, Any],
        run_dir: Path,
        resume: Checkpoint | None = None,
        on_eval: EvalCallback | None = None,
    ) -> dict[str, Any]:
        """Train with the resolved ``config`` into ``run_dir`` (continuing ``resume``); return a summary."""
        parts = build_components(config, self.warmup_period)
        agent, buffer = parts.agent, parts.buffer
        seed = config["seed"]
        env_seed = derive_seed(seed, "actor", 0, "env")
        sampler = Sampler(
            parts.env_factory,
            agent,
            parts.actors.n_envs_per_actor,
            env_seed,
            replayable=True,
            **sampler_options(config),
        )
        evaluator = Evaluator(
            parts.env_factory, self.eval_episodes, derive_seed(seed, "eval"), self.eval_max_steps
        )
        stats = SampleStats()
        opt_steps, last_saved = 0, -1
        base_env = base_opt = 0  # where the warmup and opt-step credit count from
        if resume is not None:
            state = resume.trainer_state
            restore_agent(parts, resume)
            opt_steps = last_saved = int(state["opt_steps"])
            stats.env_steps = int(state["env_steps"])
            stats.episode_returns = list(state["episode_returns"])
            stats.episode_lengths = list(state["episode_lengths"])
            sampler.restore(state["sampler"])
            base_env, base_opt = int(state["base_env"]), int(state["base_opt"])
            arrays = resume.buffer()
            if arrays is not None:
                buffer.load(state["replay"], arrays)
            else:
                buffer.continue_schedule(state["replay"])
                base_env, base_opt = stats.env_steps, opt_steps
                log.warning(
                    "resuming without a replay buffer (trainer.save_replay_buffer was off): "
                    "collecting %d transitions before optimizing again",
                    self.warmup_period,
                )
            set_global_rng_state(state["rng"])
            log.info(
                "resumed from %s at opt step %d, env step %d",
                resume.path,
                opt_steps,
                stats.env_steps,
            )
        book = RunBook(
            run_dir,
            config,
            self,
            parts.env_factory.spaces(),
            buffer.capacity,
            None,
            resume,
            on_eval,
        )

        def trainer_state() -> dict[str, Any]:
            return {
                "opt_steps": opt_steps,
                "env_steps": stats.env_steps,
                "base_env": base_env,
                "base_opt": base_opt,
                "episode_returns": list(stats.episode_returns),
                "episode_lengths": list(stats.episode_lengths),
                "sampler": sampler.state(),
                "replay": buffer.state(),
                "rng": global_rng_state(),
            }

        def save() -> None:
            book.save(opt_steps, stats.env_steps, agent, trainer_state(), buffer.arrays())

        window_start, window_env, window_opt = time.perf_counter(), stats.env_steps, opt_steps
        signals = StopSignals().install()
        status = "failed"
        try:
            while not signals.requested and not book.finished:
                if book.progress.due():  # per env step: the warmup shows its progress too
                    book.progress.update(opt_steps, stats.env_steps, len(buffer))
                ready = stats.env_steps - base_env - self.warmup_period
                due = base_opt + math.floor(ready / self.opt_interval) + 1 if ready >= 0 else 0
                while (
                    opt_steps < min(due, self.max_opts)
                    and not book.finished
                    and not signals.requested
                ):
                    metrics = learn_step(agent, buffer)
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
                            agent.state_dict(),
                            trainer_state,
                        )
                    if self.save_interval and opt_steps % self.save_interval == 0:
                        save()
                        last_saved = opt_steps
                if opt_steps >= self.max_opts or signals.requested or book.finished:
                    break
                batch = sampler.step(stats)
                if batch is not None:
                    buffer.push(batch)
            if opt_steps != last_saved:
                save()
            status = "interrupted" if signals.requested else "completed"
        finally:
            signals.restore()
            sampler.close()
            evaluator.close()
            book.close(status)
        return book.summary() | {
            "opt_steps": opt_steps,
            "env_steps": stats.env_steps,
            "interrupted": signals.requested,
        }
