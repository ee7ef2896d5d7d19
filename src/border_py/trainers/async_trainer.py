"""The async trainer: actor processes sample while the learner optimizes, weights flow back.

The learner loop never waits on actors once warmed up: between optimization steps it takes the
batches already queued (without blocking), optimizes, publishes weights every ``sync_interval``
opt steps into shared memory, and hands weights to the evaluator process every
``eval_interval`` opt steps. Replay-ratio gates keep actors from starving or flooding it:
with ``min_samples_per_opt`` the learner waits for fresh data, with ``max_samples_per_opt`` it
stops taking batches, the bounded queue fills and the actors block.
"""

from __future__ import annotations

import copy
import io
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from border_py.actors.backend import ActorBackend
from border_py.actors.process import ActorReport
from border_py.config import non_negative, positive, require
from border_py.errors import ConfigError
from border_py.evaluation.worker import EvalWorker
from border_py.processes import StopSignals
from border_py.runs.checkpoint import Checkpoint
from border_py.seeding import derive_seed, global_rng_state, set_global_rng_state
from border_py.trainers.components import Components, build_components
from border_py.trainers.run_book import EvalCallback, RunBook, learn_step, restore_agent
from border_py.trainers.settings import LoopSettings
from border_py.transport.weights import SharedWeights

log = logging.getLogger(__name__)

HEALTH_CHECK_SECONDS = 0.5
WAIT_FOR_DATA_SECONDS = 0.05


@dataclass
class Window:
    """What arrived since the last record."""

    samples: int = 0
    opts: int = 0
    lag_sum: float = 0.0
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    exploration: dict[str, list[float]] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)


@dataclass
class AsyncTrainer(LoopSettings):
    """Learner of the async trainer (actors: see :class:`~border_py.actors.local.ActorManager`).

    Args:
        sync_interval: opt steps between weight publications to the actors.
        min_samples_per_opt: the learner waits until it has received at least
            ``warmup_period + opt_steps * min_samples_per_opt`` transitions (0: never waits).
        max_samples_per_opt: the learner takes no more batches while it has received more than
            ``warmup_period + opt_steps * max_samples_per_opt`` transitions (null: no cap).
        Others: see :class:`LoopSettings`.
    """

    sync_interval: int = 10
    min_samples_per_opt: float = 0.0
    max_samples_per_opt: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        positive("sync_interval", self.sync_interval, int)
        non_negative("min_samples_per_opt", self.min_samples_per_opt, float)
        require(
            "max_samples_per_opt",
            self.max_samples_per_opt is None
            or self.max_samples_per_opt >= max(self.min_samples_per_opt, 1e-9),
            "null or >= min_samples_per_opt and > 0",
            self.max_samples_per_opt,
        )

    def check(self, config: dict[str, Any]) -> Components:
        """Validate the config, including that the agent supports the chosen exploration."""
        return self._build(config)

    def _build(self, config: dict[str, Any]) -> Components:
        parts = build_components(config, self.warmup_period)
        if parts.actors.exploration == "apex" and not hasattr(parts.agent, "set_epsilon"):
            raise ConfigError(
                "actor_manager.exploration='apex': the agent has no set_epsilon (use 'schedule')"
            )
        return parts

    def run(
        self,
        config: dict[str, Any],
        run_dir: Path,
        resume: Checkpoint | None = None,
        on_eval: EvalCallback | None = None,
    ) -> dict[str, Any]:
        """Train with actor processes (continuing ``resume``); return the run summary."""
        parts = self._build(config)
        agent, buffer = parts.agent, parts.buffer
        manager: ActorBackend = parts.actors
        ctx = manager.context()
        self.agent, self.buffer, self.manager = agent, buffer, manager
        self.opt_steps = self.received = self.env_steps = 0
        self._gate_base = (0, 0)  # (samples, opt steps) the replay-ratio gates count from
        saved_actors = None
        if resume is not None:
            state = resume.trainer_state
            restore_agent(parts, resume)
            self.opt_steps, self.env_steps = int(state["opt_steps"]), int(state["env_steps"])
            self.received, saved_actors = int(state["samples"]), state["actors"]
            self._gate_base = tuple(state["gate_base"])
            arrays = resume.buffer()
            if arrays is not None:
                buffer.load(state["replay"], arrays)
            else:
                buffer.continue_schedule(state["replay"])
                self._gate_base = (self.received, self.opt_steps)
                log.warning(
                    "resuming without a replay buffer: refilling %d transitions first",
                    self.warmup_period,
                )
            set_global_rng_state(state["rng"])
            log.info(
                "resumed from %s at opt step %d, env step %d",
                resume.path,
                self.opt_steps,
                self.env_steps,
            )
        book = self.book = RunBook(
            run_dir,
            config,
            self,
            parts.env_factory.spaces(),
            buffer.capacity,
            manager.n_actors,
            resume,
            on_eval,
        )
        self.window = Window()
        weights = self.weights = SharedWeights.create(ctx, agent.policy_state())
        weights.publish(agent.policy_state(), self.opt_steps)
        evaluator: EvalWorker | None = None
        interrupted = False
        status = "failed"
        last_health = time.monotonic()
        last_eval_requested = -1
        first_opt_at = opt_seconds = 0.0
        with StopSignals() as signals:
            try:
                evaluator = EvalWorker(
                    ctx,
                    config,
                    self.eval_episodes,
                    derive_seed(config["seed"], "eval"),
                    self.eval_max_steps,
                )
                manager.start(ctx, config, weights, saved_actors)
                log.info("started %d actors x %d envs", manager.n_actors, manager.n_envs_per_actor)
                while (
                    self.opt_steps < self.max_opts and not book.finished and not signals.requested
                ):
                    starving = self._starving()
                    if starving:
                        self._ingest(manager.poll(timeout=WAIT_FOR_DATA_SECONDS))
                    elif not self._flooded():
                        self._ingest(manager.poll(timeout=0))
                    if signals.requested:  # no health checks or restarts once stopping
                        break
                    if time.monotonic() - last_health > HEALTH_CHECK_SECONDS:
                        manager.check()
                        last_health = time.monotonic()
                    for result in evaluator.poll():
                        self._on_eval(*result)
                    if book.progress.due():
                        book.progress.update(
                            self.opt_steps,
                            self.received,
                            len(buffer),
                            manager.alive(),
                            manager.restarts(),
                        )
                    if starving:
                        continue
                    if self.opt_steps == 0:
                        first_opt_at = time.perf_counter()
                    metrics = learn_step(agent, buffer)
                    self.opt_steps += 1
                    self.window.opts += 1
                    if self.opt_steps % self.sync_interval == 0:
                        weights.publish(agent.policy_state(), self.opt_steps)
                    if self.opt_steps % self.record_interval == 0:
                        self._record(metrics)
                    if self.opt_steps % self.eval_interval == 0 and self._request_eval(evaluator):
                        last_eval_requested = self.opt_steps
                    if self.save_interval and self.opt_steps % self.save_interval == 0:
                        self._save()
                interrupted = signals.requested
                opt_seconds = time.perf_counter() - first_opt_at if self.opt_steps else 0.0
                manager.stop(on_report=self._ingest_one)
                if not interrupted:
                    self._finish_evaluations(evaluator, last_eval_requested, signals)
                if not (self.save_interval and self.opt_steps % self.save_interval == 0):
                    self._save()
                status = "interrupted" if interrupted else "completed"
            finally:
                manager.stop(on_report=self._ingest_one)
                if evaluator is not None:
                    evaluator.close()
                book.close(status)
        accounting = manager.accounting()
        self._log_actor_table(accounting)
        return book.summary() | {
            "opt_steps": self.opt_steps,
            "env_steps": self.env_steps,
            "samples": self.received,
            "opt_steps_per_sec": self.opt_steps / opt_seconds if opt_seconds else 0.0,
            "interrupted": interrupted,
            "accounting": accounting,
            "restarts": manager.restarts(),
        }

    # -- data in -------------------------------------------------------------------------

    def _starving(self) -> bool:
        """Whether the learner must wait for data (warmup, or the min replay-ratio gate)."""
        if len(self.buffer) < max(self.warmup_period, self.agent.batch_size, 1):
            return True
        received, opts = self.received - self._gate_base[0], self.opt_steps - self._gate_base[1]
        need = self.warmup_period + (opts + 1) * self.min_samples_per_opt
        return self.min_samples_per_opt > 0 and received < need

    def _flooded(self) -> bool:
        """Whether the learner has taken as many samples as the max replay-ratio gate allows."""
        if self.max_samples_per_opt is None:
            return False
        received, opts = self.received - self._gate_base[0], self.opt_steps - self._gate_base[1]
        return received >= self.warmup_period + (opts + 1) * self.max_samples_per_opt

    def _ingest(self, reports: list[ActorReport]) -> None:
        for report in reports:
            self._ingest_one(report)

    def _ingest_one(self, report: ActorReport) -> None:
        if report.kind != "batch" or report.transitions is None:
            return
        n = len(report.transitions)
        self.buffer.push(report.transitions)
        self.received += n
        self.env_steps += report.env_steps
        w = self.window
        w.samples += n
        w.lag_sum += n * (self.opt_steps - report.policy_opt_steps)
        w.returns += report.episode_returns
        w.lengths += report.episode_lengths
        for key, value in report.exploration.items():
            w.exploration.setdefault(key, []).append(value)

    # -- bookkeeping ---------------------------------------------------------------------

    def _record(self, metrics: dict[str, Any]) -> None:
        w, now = self.window, time.perf_counter()
        seconds = max(now - w.start, 1e-9)
        scalars = dict(metrics) | {k: float(np.mean(v)) for k, v in w.exploration.items()}
        if w.returns:
            scalars |= {
                "actor/episode_return": float(np.mean(w.returns)),
                "actor/episode_length": float(np.mean(w.lengths)),
            }
        scalars |= {
            "perf/env_steps": self.env_steps,
            "perf/samples_total": self.received,
            "perf/samples_per_sec": w.samples / seconds,
            "perf/env_steps_per_sec": w.samples / seconds,
            "perf/opt_steps_per_sec": w.opts / seconds,
            "perf/samples_per_opt_step": w.samples / max(w.opts, 1),
            "perf/queue_depth": self.manager.queue_depth(),
            "actor/alive": self.manager.alive(),
            "actor/restarts": self.manager.restarts(),
            "buffer/size": len(self.buffer),
        }
        if w.samples:
            scalars["perf/policy_lag"] = w.lag_sum / w.samples
        self.book.recorder.scalars(scalars, self.opt_steps)
        self.window = Window(start=now)

    def _trainer_state(self) -> dict[str, Any]:
        return {
            "opt_steps": self.opt_steps,
            "env_steps": self.env_steps,
            "samples": self.received,
            "gate_base": list(self._gate_base),
            "actors": [r.state() for r in self.manager.actors],
            "replay": self.buffer.state(),
            "policy_version": self.weights.version,
            "rng": global_rng_state(),
        }

    def _save(self) -> None:
        self.book.save(
            self.opt_steps, self.env_steps, self.agent, self._trainer_state(), self.buffer.arrays()
        )

    def _on_eval(
        self,
        opt_steps: int,
        env_steps: int,
        result: Any,
        weights: dict,
        snapshot: tuple[dict, dict],
    ) -> None:
        """Record an evaluation at the opt step of the weights it evaluated."""
        agent_state, trainer_state = snapshot
        self.book.on_eval(result, opt_steps, env_steps, weights, agent_state, lambda: trainer_state)

    def _request_eval(self, evaluator: EvalWorker) -> bool:
        """Hand the current weights (and a snapshot of the learner's state) to the evaluator."""
        if evaluator.busy:
            log.info("evaluation at opt %d skipped: the evaluator is still busy", self.opt_steps)
            return False
        snapshot = (copy.deepcopy(self.agent.state_dict()), self._trainer_state())
        return evaluator.request(
            self.opt_steps, self.env_steps, self.agent.policy_state(), snapshot
        )

    def _finish_evaluations(
        self, evaluator: EvalWorker, last_requested: int, signals: StopSignals
    ) -> None:
        """Collect the evaluation in flight, then evaluate the final weights if not done yet.

        A stop signal meanwhile cuts this short (the final checkpoint follows at once).
        """
        deadline = time.monotonic() + 600
        while evaluator.busy and time.monotonic() < deadline and not signals.requested:
            for result in evaluator.poll(timeout=0.5):
                self._on_eval(*result)
        if last_requested != self.opt_steps and not self.book.finished and not signals.requested:
            self._request_eval(evaluator)
            while evaluator.busy and time.monotonic() < deadline and not signals.requested:
                for result in evaluator.poll(timeout=0.5):
                    self._on_eval(*result)

    def _log_actor_table(self, accounting: dict[str, int]) -> None:
        table = Table(title="actors")
        for column in ("actor", "samples", "episodes", "mean return", "restarts"):
            table.add_column(column, justify="right")
        for i, r in enumerate(self.manager.actors):
            mean = f"{r.return_sum / r.episodes:.1f}" if r.episodes else "-"
            table.add_row(str(i), str(r.received), str(r.episodes), mean, str(r.restarts))
        console = Console(file=io.StringIO(), width=80)
        console.print(table)
        log.info("\n%s", console.file.getvalue().rstrip())
        log.info(
            "transitions: sent %d, received %d, dropped at stop %d (opt steps %d, env steps %d)",
            accounting["sent"],
            accounting["received"],
            accounting["dropped"],
            self.opt_steps,
            self.env_steps,
        )
