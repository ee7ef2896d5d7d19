"""The async trainer: actor processes sample while the learner optimizes, weights flow back.

It runs the learning loop (:mod:`border_py.trainers.loop`) with the actors the ``actor_manager``
group configures (local actor processes by default) and an evaluator process. The learner never waits on actors
once warmed up: between optimization steps it takes the batches already announced (without
blocking), optimizes, publishes weights every ``sync_interval`` opt steps, and hands weights to the
evaluator every ``eval_interval`` opt steps. Replay-ratio gates keep actors from starving or
flooding it: with ``min_samples_per_opt`` the learner waits for fresh data, with
``max_samples_per_opt`` it stops taking batches and the actors wait for free slots.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from border_py.actors.runtime import env_steps_per_batch
from border_py.agents.base import RecurrentActing
from border_py.config import niceness, non_negative, positive, require
from border_py.evaluation.process import EvalSettings
from border_py.evaluation.seeds import selection_seed
from border_py.evaluation.worker import EvalWorker
from border_py.runs.settings import RunSettings
from border_py.seeding import derive_seed
from border_py.trainers.components import Components
from border_py.trainers.settings import LoopSettings, RunState, Wiring

__all__ = ["AsyncSettings", "SampleGate"]

WAIT_FOR_DATA_SECONDS = 0.05


class SampleGate:
    """Optimize once the buffer holds ``warmup_period`` transitions (and a batch); with
    ``min_samples_per_opt``, only while that many new samples per opt step arrived (the learner
    waits for data, idle); take no more batches while more than ``max_samples_per_opt`` per opt
    step did, plus ``slack`` samples (the actors wait for free slots).

    With ``env_steps`` (a recurrent agent, whose samples are sequences that each stand for about
    ``period`` env steps) the gates count the env steps received instead of samples, the warmup
    too, so that ``trainer.replay_ratio`` and ``warmup_period`` mean what they mean in the serial
    trainer (per env step; the buffer holds a batch first)."""

    wait_seconds = WAIT_FOR_DATA_SECONDS

    def __init__(
        self,
        warmup_period: int,
        batch_size: int,
        min_samples_per_opt: float,
        max_samples_per_opt: float | None,
        slack: int = 0,
        env_steps: bool = False,
    ) -> None:
        self.warmup_period, self.batch_size = warmup_period, batch_size
        self.min_samples_per_opt = min_samples_per_opt
        self.max_samples_per_opt = max_samples_per_opt
        self.slack = slack
        self.env_steps = env_steps
        self.base_samples = self.base_opts = 0  # with env_steps: the base of the env steps

    def _received(self, state: RunState) -> int:
        return state.env_steps if self.env_steps else state.samples

    def _counts(self, state: RunState) -> tuple[int, int]:
        return self._received(state) - self.base_samples, state.opt_steps - self.base_opts

    def may_optimize(self, state: RunState, buffered: int) -> bool:
        """Whether the learner has the data for one more opt step."""
        samples, opts = self._counts(state)
        if self.env_steps and samples < self.warmup_period:
            return False
        warmup = 0 if self.env_steps else self.warmup_period  # in the buffer
        if buffered < max(warmup, self.batch_size, 1):
            return False
        if self.min_samples_per_opt <= 0:
            return True
        return samples >= self.warmup_period + (opts + 1) * self.min_samples_per_opt

    def may_ingest(self, state: RunState, buffered: int) -> bool:
        """Whether the learner may take more batches (the max replay-ratio gate)."""
        if self.max_samples_per_opt is None:
            return True
        samples, opts = self._counts(state)
        return samples < self.warmup_period + (opts + 1) * self.max_samples_per_opt + self.slack

    def restart(self, state: RunState) -> None:
        """Count the warmup from now."""
        self.base_samples, self.base_opts = self._received(state), state.opt_steps

    def state(self) -> dict[str, Any]:
        """Where the gates count from."""
        return {"base_samples": self.base_samples, "base_opts": self.base_opts}

    def restore(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state`."""
        self.base_samples, self.base_opts = int(state["base_samples"]), int(state["base_opts"])


@dataclass(kw_only=True)
class AsyncSettings(LoopSettings):
    """The async trainer's settings (its actors': the ``actor_manager`` group).

    With ``replay_ratio`` set, the learner holds it for slow and fast envs alike: it waits
    (idle) for ``batch_size / replay_ratio`` new transitions per opt step, and takes no more than
    that, plus one batch per actor of slack, so that faster actors wait for free slots. A
    recurrent agent's actors send sequences: its gates count env steps, not sequences
    (:class:`SampleGate`). Its other keys: see :class:`LoopSettings`.

    Args:
        sync_interval: opt steps between weight publications to the actors.
        min_samples_per_opt: (``replay_ratio`` null) the learner waits until it has received at
            least ``warmup_period + opt_steps * min_samples_per_opt`` transitions (a recurrent
            agent's: env steps; 0: never waits).
        max_samples_per_opt: (``replay_ratio`` null) the learner takes no more batches while it
            has received more than ``warmup_period + opt_steps * max_samples_per_opt`` (null: no
            cap).
        eval_nice: the evaluator process's niceness (Unix), so that the learner keeps its core
            while an evaluation runs beside it (0: the learner's priority).
    """

    sync_interval: int
    min_samples_per_opt: float
    max_samples_per_opt: float | None
    eval_nice: int

    def __post_init__(self) -> None:
        super().__post_init__()
        positive("sync_interval", self.sync_interval, int)
        niceness("eval_nice", self.eval_nice)
        non_negative("min_samples_per_opt", self.min_samples_per_opt, float)
        require(
            "max_samples_per_opt",
            self.max_samples_per_opt is None
            or self.max_samples_per_opt >= max(self.min_samples_per_opt, 1e-9),
            "null or >= min_samples_per_opt and > 0",
            self.max_samples_per_opt,
        )
        require(
            "min_samples_per_opt",
            self.replay_ratio is None
            or (self.min_samples_per_opt == 0 and self.max_samples_per_opt is None),
            "0 (and max_samples_per_opt null) when trainer.replay_ratio is set: the replay ratio"
            " sets both",
            self.min_samples_per_opt,
        )

    def check_components(self, parts: Components) -> None:
        """Refuse actors' settings that configure no actors of their own (one line, before the
        run dir is claimed): their runtime is built, not started."""
        parts.actors.runtime()

    def check_resources(self, config: dict[str, Any], parts: Components, run: RunSettings) -> None:
        """The actors' bounds: their processes, the learner's open files and the shared memory of
        their slots."""
        spaces = parts.env_factory.spaces()
        parts.actors.check_resources(config, spaces, parts.agent, run.check_resources)

    def actors_shown(self, parts: Components) -> int | None:
        """Every actor the settings start."""
        return parts.actors.n_actors

    def wiring(self, config: dict[str, Any], parts: Components, run: RunSettings) -> Wiring:
        """The actors the ``actor_manager`` settings configure, an evaluator process, the
        replay-ratio gates."""
        actors = parts.actors
        runtime = actors.runtime()
        evaluation = EvalWorker(
            actors.context(),
            config,
            EvalSettings(
                self.eval_episodes,
                selection_seed(run.seed),
                self.eval_max_steps,
                self.evaluation_epsilon(parts.env_factory.eval_epsilon),
                agent_seed=derive_seed(run.seed, "evaluator"),
            ),
            parts.agent.policy_state(),
            actors.max_restarts,
            actors.heartbeat_timeout,
            self.eval_nice,
        )
        agent = parts.agent
        batch, env_steps = agent.batch_size, isinstance(agent, RecurrentActing)
        if self.replay_ratio is not None:
            per_opt = batch / self.replay_ratio
            slack = actors.n_actors * env_steps_per_batch(actors.n_buffer, agent)
            gate = SampleGate(self.warmup_period, batch, per_opt, per_opt, slack, env_steps)
        else:
            gate = SampleGate(
                self.warmup_period,
                batch,
                self.min_samples_per_opt,
                self.max_samples_per_opt,
                env_steps=env_steps,
            )
        return Wiring(runtime, evaluation, gate, self.sync_interval)
