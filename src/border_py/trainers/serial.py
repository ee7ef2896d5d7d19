"""The serial trainer: one process samples, optimizes, evaluates and saves, in border's loop order.

Per env step: sample and push; then the opt steps now due; evaluation and checkpoints when due
after each. It runs the learning loop (:mod:`border_py.trainers.loop`) with one actor in the
learner's process and evaluation in process, which makes it the debugging and testing mode of the
async trainer. On CPU with a fixed seed it is exactly reproducible, across a stop and a resume too
(with ``save_replay_buffer``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from border_py.actors.inline import InlineActors
from border_py.config import positive, require
from border_py.errors import ConfigError
from border_py.evaluation.evaluator import Evaluator
from border_py.evaluation.seeds import selection_seed
from border_py.evaluation.service import InlineEvaluation
from border_py.runs.settings import RunSettings
from border_py.trainers.components import Components
from border_py.trainers.settings import LoopSettings, RunState, Wiring

__all__ = ["SerialSettings"]

log = logging.getLogger(__name__)


def due_opt_steps(env_steps: int, origin: int, base_opt: int, opt_interval: float) -> int:
    """Opt steps due after ``env_steps`` env steps when one falls due at ``origin`` and then one
    every ``opt_interval`` env steps (counting from ``base_opt``)."""
    return base_opt + math.floor((env_steps - origin) / opt_interval) + 1


class EnvStepSchedule:
    """border's serial schedule: opt steps fall due once ``warmup_period`` env steps are collected
    (and the buffer holds a batch), then one every ``opt_interval`` env steps; env steps are taken
    only while no opt step is due."""

    wait_seconds = 0.0

    def __init__(self, warmup_period: int, opt_interval: float, batch_size: int) -> None:
        self.warmup_period, self.opt_interval, self.batch_size = (
            warmup_period,
            opt_interval,
            batch_size,
        )
        self.base_env = self.base_opt = 0
        self.buffer_ready_at: int | None = None  # env steps when the buffer first held a batch

    def may_optimize(self, state: RunState, buffered: int) -> bool:
        """Whether an opt step is due."""
        if self.buffer_ready_at is None:
            if buffered < max(self.batch_size, 1):
                return False
            self.buffer_ready_at = state.env_steps
        origin = max(self.base_env + self.warmup_period, self.buffer_ready_at)
        if state.env_steps < origin:
            return False
        return state.opt_steps < due_opt_steps(
            state.env_steps, origin, self.base_opt, self.opt_interval
        )

    def may_ingest(self, state: RunState, buffered: int) -> bool:
        """Env steps only while no opt step is due (border's order)."""
        return not self.may_optimize(state, buffered)

    def restart(self, state: RunState) -> None:
        """Count the warmup from now."""
        self.base_env, self.base_opt = state.env_steps, state.opt_steps
        self.buffer_ready_at = None

    def state(self) -> dict[str, Any]:
        """Where the schedule counts from."""
        return {
            "base_env": self.base_env,
            "base_opt": self.base_opt,
            "buffer_ready_at": self.buffer_ready_at,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`."""
        self.base_env, self.base_opt = int(state["base_env"]), int(state["base_opt"])
        ready = state["buffer_ready_at"]
        self.buffer_ready_at = None if ready is None else int(ready)


@dataclass(kw_only=True)
class SerialSettings(LoopSettings):
    """The serial trainer's settings: one process, per env step, sample and push; then the opt
    steps due; evaluate and save when due.

    Opt steps become due once ``warmup_period`` env steps are collected, one every
    ``opt_interval`` env steps after that (``batch_size / replay_ratio`` when the replay ratio is
    set instead). Its other keys: see :class:`LoopSettings`.

    Args:
        opt_interval: env steps per optimization step (0.5 = two opt steps per env step); set it
            or ``replay_ratio``, not both.
    """

    opt_interval: float | None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.opt_interval is not None:
            positive("opt_interval", self.opt_interval)
        require(
            "opt_interval",
            (self.opt_interval is None) != (self.replay_ratio is None),
            "set when trainer.replay_ratio is null, and null when it is set (one of the two"
            " says how often to optimize)",
            self.opt_interval,
        )

    def env_steps_per_opt(self, batch_size: int) -> float:
        """``opt_interval``, or what the replay ratio makes of it for this batch size."""
        if self.opt_interval is not None:
            return float(self.opt_interval)
        assert self.replay_ratio is not None
        return batch_size / self.replay_ratio

    def check_components(self, parts: Components) -> None:
        """Refuse another acting precision: the in-process actor acts with the learner's agent
        (``auto`` is float32 here)."""
        if parts.actors.policy_dtype not in ("auto", "float32"):
            raise ConfigError(
                f"actor_manager.policy_dtype={parts.actors.policy_dtype!r}: only actor processes"
                " (trainer=async) act in another precision; the serial trainer acts with the"
                " learner's own float32 network"
            )

    def wiring(self, config: dict[str, Any], parts: Any, run: RunSettings) -> Wiring:
        """One in-process actor acting with the learner's agent, evaluation in process."""
        evaluator = Evaluator(
            parts.env_factory,
            self.eval_episodes,
            selection_seed(run.seed),
            self.eval_max_steps,
            epsilon=self.evaluation_epsilon(parts.env_factory.eval_epsilon),
        )
        return Wiring(
            actors=InlineActors(parts.actors),
            evaluation=InlineEvaluation(evaluator, parts.agent),
            gate=EnvStepSchedule(
                self.warmup_period,
                self.env_steps_per_opt(parts.agent.batch_size),
                parts.agent.batch_size,
            ),
            publish_interval=1,
        )
