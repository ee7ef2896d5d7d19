"""The one training loop, the same for every trainer.

The learner takes batches from the actors into the replay buffer, optimizes when the gate
says it may, publishes its weights, asks for evaluations, records, checkpoints, and stops at the
budget, the target return, a stop signal or a callback's request; at a normal end it
has its final weights and the best checkpoint's played on fresh episodes
(:mod:`border_py.trainers.final`). Trainers differ only in their wiring
(:mod:`border_py.trainers.serial`, :mod:`border_py.trainers.async_trainer`): which actors, which
evaluation service, which gate.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from border_py.agents.base import Agent
from border_py.layout import BEST
from border_py.processes.signals import StopSignals
from border_py.recorders.progress import Steps
from border_py.replay.base import PrioritizedReplay, ReplayBuffer
from border_py.runs.state import Owners, TrainerState
from border_py.trainers.cadence import Cadence
from border_py.trainers.components import Components
from border_py.trainers.final import PolicySnapshot, best_snapshot, final_scores, score_scalars
from border_py.trainers.metrics import Window, training_scalars
from border_py.trainers.prefetch import build_prefetcher
from border_py.trainers.run_book import RunBook
from border_py.trainers.settings import LoopSettings, RunState, Wiring
from border_py.transport.batch import ReceivedBatch

__all__ = ["Learner", "LearnerParts", "learn_step"]

log = logging.getLogger(__name__)

HEALTH_CHECK_SECONDS = 0.5  # how often actors' and evaluator's health is checked
FINAL_EVAL_SECONDS = 600.0  # the longest the end of a run waits for evaluations


def learn_step(agent: Agent, buffer: ReplayBuffer) -> dict[str, Any]:
    """One optimization step: sample a batch from the replay buffer, update the agent on it.

    A prioritized sample (its ``index`` set) gets its rows' priorities replaced by the ``td_error``
    the agent returns; ``td_error`` is never returned as a metric.
    """
    batch = buffer.sample(agent.batch_size)
    metrics = agent.update(batch)
    td_error = metrics.pop("td_error", None)
    if batch.index is not None:
        if td_error is None or not isinstance(buffer, PrioritizedReplay):
            raise RuntimeError(
                f"{type(agent).__name__}.update returned no 'td_error' for a prioritized batch"
            )
        buffer.update_priorities(batch.index, np.asarray(td_error))
    return metrics


@dataclass
class LearnerParts:
    """What the learning loop works with: the components, the trainer's wiring (actors,
    evaluation service, gate), the run's bookkeeping, when it evaluates and saves, and its final
    evaluations' reset seeds."""

    components: Components
    wiring: Wiring
    book: RunBook
    cadence: Cadence
    final_seeds: range = range(0)  # none: no final evaluation

    def owners(self, counters: RunState) -> Owners:
        """Who holds each part of the run's state (:mod:`border_py.runs.state`)."""
        wiring = self.wiring
        return Owners(
            counters, self.cadence, wiring.gate, self.components.buffer, wiring.actors, self.book
        )


class Learner:
    """The training loop (see the module docstring).

    Args:
        settings: the trainer's loop settings.
        parts: the components, the wiring and the run's bookkeeping.
        state: the run's counters (a resumed run's, restored, or zeros).
        signals: the stop signals installed for the run.
    """

    def __init__(
        self, settings: LoopSettings, parts: LearnerParts, state: RunState, signals: StopSignals
    ) -> None:
        wiring = parts.wiring
        self.settings, self.book, self.cadence = settings, parts.book, parts.cadence
        self.agent, self.buffer = parts.components.agent, parts.components.buffer
        self.actors, self.evaluation, self.gate = wiring.actors, wiring.evaluation, wiring.gate
        self.publish_interval = wiring.publish_interval
        self.state, self.signals = state, signals
        self.owners = parts.owners(state)
        self.final_seeds = parts.final_seeds
        self.scores: dict[str, dict[str, Any]] = {}  # the final evaluations (trainers/final.py)
        self.session_opts = state.opt_steps  # where this session started
        self.first_opt_at: float | None = None  # when this session's first opt step began
        self.last_opt_at = 0.0  # when its latest opt step (and what came with it) ended
        self.last_saved = state.opt_steps  # a resumed run's checkpoint is its own
        self.last_eval_requested = -1
        self.window = Window()
        self.published: deque[tuple[int, float]] = deque(maxlen=64)  # (opt steps, time)
        self.prefetch = build_prefetcher(
            settings.prefetch, self.agent, self.buffer, lambda: self.signals.requested
        )
        # the buffer is shared with the prefetch thread: pushes and checkpoint reads take its lock
        self.buffer_lock: contextlib.AbstractContextManager[Any] = (
            self.prefetch.lock if self.prefetch else contextlib.nullcontext()
        )

    # -- the loop ----------------------------------------------------------------------------

    def run(self) -> bool:
        """Train (the actors started) until a stop condition; return True if a stop signal
        ended the training (one during the final evaluations cuts them short, and the run, whose
        budget was done, still completed). The prefetch thread, if any, is closed whatever ends
        the loop."""
        try:
            self._train()
        except BaseException:
            if self.prefetch is not None:
                self.prefetch.close(flush=False)
            raise
        if self.prefetch is not None:
            self.prefetch.close(flush=True)
        return self._stop()

    def _train(self) -> None:
        state = self.state
        last_health = time.monotonic()
        while not self._finished():
            buffered = len(self.buffer)
            starving = not self.gate.may_optimize(state, buffered)
            if starving or self.gate.may_ingest(state, buffered):
                self.actors.poll(self.gate.wait_seconds if starving else 0.0, self.ingest)
            if self.signals.requested:
                break
            if time.monotonic() - last_health > HEALTH_CHECK_SECONDS:
                self.actors.check()
                self.evaluation.check()
                last_health = time.monotonic()
            self._collect_evaluations()
            self._show_progress()
            if self.gate.may_optimize(state, len(self.buffer)):
                self._optimize()

    def _stop(self) -> bool:
        state = self.state
        interrupted = self.signals.requested
        log.info(
            "stopping at opt %d, env steps %d: %s",
            state.opt_steps,
            state.env_steps,
            self._stop_reason(),
        )
        self.actors.stop(self.ingest)
        if not interrupted:
            self._finish_evaluations()
        if state.opt_steps > 0 and state.opt_steps != self.last_saved:
            self.save()
        self.book.progress.finish(
            Steps(state.opt_steps, state.env_steps),
            state.samples,
            len(self.buffer),
            self.actors.alive(),
            self.actors.restarts(),
        )
        if not interrupted and self.final_seeds and not self.book.stopped_by_callback:
            final = PolicySnapshot(state.opt_steps, state.env_steps, self.agent.policy_state())
            best = best_snapshot(self.book.checkpoints / BEST)
            self.scores = final_scores(
                self.evaluation, self.final_seeds, final, best, lambda: self.signals.requested
            )
            self.book.final_scalars = score_scalars(self.scores)  # recorded at the run's end
        return interrupted

    def _finished(self) -> bool:
        settings, state = self.settings, self.state
        return (
            (settings.max_opts is not None and state.opt_steps >= settings.max_opts)
            or (settings.max_env_steps is not None and state.env_steps >= settings.max_env_steps)
            or self.book.finished
            or self.signals.requested
        )

    def _stop_reason(self) -> str:
        settings, state, book = self.settings, self.state, self.book
        if self.signals.requested:
            return "interrupted"
        if book.solved_at is not None:
            return f"target_return {settings.target_return:g} reached"
        if book.stopped_by_callback:
            return "stopped by a callback"
        if settings.max_opts is not None and state.opt_steps >= settings.max_opts:
            return "max_opts reached"
        return "max_env_steps reached"

    def ingest(self, batch: ReceivedBatch) -> None:
        """Take a batch into the replay buffer and the counters (the actors' ``deliver``)."""
        state = self.state
        self.window.take(batch, state.opt_steps)
        if batch.transitions is not None and len(batch.transitions):
            with self.buffer_lock:
                # a recurrent agent's sequences go to a sequence buffer (check_replay_unit)
                self.buffer.push(batch.transitions)  # type: ignore[arg-type]
            state.samples += len(batch.transitions)
        state.env_steps += batch.env_steps
        budget = self.settings.max_env_steps
        if budget is not None and state.env_steps >= budget:
            self.actors.halt()  # at once: what actors sample on until the stop is overshoot

    def _optimize(self) -> None:
        state, settings = self.state, self.settings
        if self.first_opt_at is None:
            self.first_opt_at = time.perf_counter()
        if self.prefetch is None:
            metrics = learn_step(self.agent, self.buffer)
        else:
            prefetched = self.prefetch.learn()
            if prefetched is None:  # a stop came while the batch was awaited: the loop ends
                return
            metrics = prefetched
        state.opt_steps += 1
        self.window.opts += 1
        if state.opt_steps % self.publish_interval == 0:
            self.actors.publish(self.agent.policy_state(), state.opt_steps)
            self.published.append((state.opt_steps, time.time()))
        if state.opt_steps % settings.record_interval == 0:
            self._record(metrics)
        self.last_opt_at = time.perf_counter()
        if self.cadence.evaluation_due():
            self._request_evaluation()
            self._collect_evaluations()
        if self.cadence.save_due():
            self.save()

    # -- evaluations ---------------------------------------------------------------------------

    def _request_evaluation(self) -> bool:
        state = self.state
        if self.evaluation.busy:
            log.info("evaluation at opt %d skipped: the evaluator is still busy", state.opt_steps)
            return False
        # no stop callable: a selection evaluation plays whole (its result is the run's, and a
        # serial run stopped and resumed stays the uninterrupted one)
        asked = self.evaluation.request(
            state.opt_steps,
            state.env_steps,
            self.agent.policy_state(),
            lambda: (self.agent.state_dict(), self.trainer_state()),
        )
        if asked:
            self.last_eval_requested = state.opt_steps
        return asked

    def _collect_evaluations(self, timeout: float = 0.0) -> None:
        for outcome in self.evaluation.poll(timeout):
            self.book.on_eval(outcome)

    def _finish_evaluations(self) -> None:
        """Collect the evaluation in flight, then evaluate the final weights if not done yet.

        A stop signal meanwhile cuts this short (the final checkpoint follows at once).
        """
        deadline = time.monotonic() + FINAL_EVAL_SECONDS

        def wait() -> None:
            while (
                self.evaluation.busy and time.monotonic() < deadline and not self.signals.requested
            ):
                self._collect_evaluations(timeout=0.2)
                self.evaluation.check()

        wait()
        done = self.last_eval_requested == self.state.opt_steps or self.book.finished
        if not done and not self.signals.requested and self.state.opt_steps > 0:
            self._request_evaluation()
            self._collect_evaluations()
            wait()

    # -- records and checkpoints -------------------------------------------------------------

    def _record(self, metrics: dict[str, Any]) -> None:
        now = time.perf_counter()
        scalars = training_scalars(
            metrics,
            self.window,
            self.state,
            self.actors,
            self.agent.batch_size,
            len(self.buffer),
            now,
        )
        self.book.record(scalars, self.state.opt_steps, self.state.env_steps)
        self.window = Window(start=now)

    def _show_progress(self) -> None:
        if self.book.progress.due():
            self.book.progress.update(
                Steps(self.state.opt_steps, self.state.env_steps),
                self.state.samples,
                len(self.buffer),
                self.actors.alive(),
                self.actors.restarts(),
            )

    def trainer_state(self) -> TrainerState:
        """The run's state now (:meth:`TrainerState.capture`), the replay buffer held still."""
        with self.buffer_lock:
            return TrainerState.capture(self.owners)

    def save(self) -> None:
        """A periodic (or final) checkpoint of the run as it is now (with prefetch: the last
        step's priorities written back first, the sampling thread held off meanwhile)."""
        if self.prefetch is not None:
            self.prefetch.flush()
        with self.buffer_lock:
            self.book.save(self.agent, self.trainer_state(), self.buffer.arrays())
        self.last_saved = self.state.opt_steps

    def opt_steps_per_sec(self) -> float:
        """This session's opt steps per second while it optimized: from the start of its first opt
        step to the end of its last (the stop, the final evaluation and checkpoint excluded)."""
        if self.first_opt_at is None:
            return 0.0
        seconds = self.last_opt_at - self.first_opt_at
        done = self.state.opt_steps - self.session_opts
        return done / seconds if seconds > 0 and done > 0 else 0.0
