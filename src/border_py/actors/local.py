"""The ``actor_manager`` config group and the process-based actor manager of the async trainer.

:class:`ActorManager` starts ``n_actors`` actor processes from one spawn context, collects their
reports from one bounded queue, watches their liveness, restarts crashed actors up to
``max_restarts`` times each, and shuts them down in stages. The serial trainer uses only its
settings (one in-process actor).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import multiprocessing.connection
import os
import queue as queue_lib
import time
from multiprocessing.context import BaseContext
from typing import Any

from border_py.actors.backend import ActorFailure, ActorRecord, apex_epsilons
from border_py.actors.process import ActorReport, ActorSpec, actor_main
from border_py.config import fraction, non_negative, positive, require
from border_py.processes import lower_priority
from border_py.transport.weights import SharedWeights

log = logging.getLogger(__name__)


class ActorManager:
    """Sampling settings (the ``actor_manager`` group) and, for the async trainer, the actor processes.

    Args:
        n_actors: actor processes.
        n_envs_per_actor: envs each actor steps together as a gymnasium vector env, with one
            batched policy call per step.
        n_buffer: transitions an actor accumulates before sending them (border's name).
        exploration: ``schedule`` (every actor follows the agent's own schedule) or ``apex``
            (actor i of N acts with the fixed epsilon eps ** (1 + alpha * i / (N - 1))).
        apex_eps: Ape-X's base epsilon.
        apex_alpha: Ape-X's exponent spread.
        queue_size: reports the queue holds before actors block (back-pressure).
        max_restarts: restarts allowed per actor before the run aborts.
        nice: niceness increment of the actor processes (Unix), so that on a machine with few
            cores the learner keeps its share of CPU however many actors run (0: same priority).
        start_method: ``forkserver`` (children fork from a server that imported border-py once:
            fast starts, fast restarts) or ``spawn`` (every child imports everything anew).
    """

    def __init__(
        self,
        n_actors: int = 1,
        n_envs_per_actor: int = 1,
        n_buffer: int = 100,
        exploration: str = "schedule",
        apex_eps: float = 0.4,
        apex_alpha: float = 7.0,
        queue_size: int = 64,
        max_restarts: int = 3,
        nice: int = 10,
        start_method: str = "forkserver",
    ) -> None:
        positive("n_actors", n_actors, int)
        positive("n_envs_per_actor", n_envs_per_actor, int)
        positive("n_buffer", n_buffer, int)
        require(
            "exploration", exploration in ("schedule", "apex"), "'schedule' or 'apex'", exploration
        )
        fraction("apex_eps", apex_eps)
        non_negative("apex_alpha", apex_alpha, float)
        positive("queue_size", queue_size, int)
        non_negative("max_restarts", max_restarts)
        require(
            "start_method",
            start_method in mp.get_all_start_methods() and start_method in ("forkserver", "spawn"),
            f"one of {[m for m in ('forkserver', 'spawn') if m in mp.get_all_start_methods()]}",
            start_method,
        )
        require("nice", isinstance(nice, int) and 0 <= nice <= 19, "an int in [0, 19]", nice)
        self.n_actors = n_actors
        self.n_envs_per_actor = n_envs_per_actor
        self.n_buffer = n_buffer
        self.exploration = exploration
        self.apex_eps = apex_eps
        self.apex_alpha = apex_alpha
        self.queue_size = queue_size
        self.max_restarts = max_restarts
        self.nice = nice
        self.start_method = start_method
        self.actors: list[ActorRecord] = []
        self._ctx: BaseContext | None = None
        self._stopped = False
        self._closed = False

    def context(self) -> BaseContext:
        """The multiprocessing context every child of the run starts from."""
        ctx = mp.get_context(self.start_method)
        if self.start_method == "forkserver":
            # the server imports these once; each child is then a cheap fork of it
            ctx.set_forkserver_preload(["border_py.actors.process", "border_py.evaluation.worker"])
        return ctx

    def epsilons(self) -> list[float | None]:
        """The fixed epsilon of each actor (None: the agent's schedule)."""
        if self.exploration == "apex":
            return list(apex_epsilons(self.n_actors, self.apex_eps, self.apex_alpha))
        return [None] * self.n_actors

    # -- process management (async trainer) -------------------------------------------------

    def start(
        self,
        ctx: BaseContext,
        config: dict[str, Any],
        weights: SharedWeights,
        resume: list[dict[str, Any]] | None = None,
    ) -> None:
        """Start the actor processes; they wait for the first published weights.

        Args:
            ctx: the multiprocessing context.
            config: the resolved run config.
            weights: where the learner publishes weights.
            resume: the actors' saved :meth:`ActorRecord.state` (a resumed run): counters and
                exploration positions continue, envs get fresh seeds.
        """
        self._ctx, self._config, self._weights = ctx, config, weights
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        if cores and self.n_actors > cores:
            log.warning(
                "%d actors on %d CPU cores: actors, learner and evaluator share them (the actors"
                " run at nice %d, so the learner keeps its share; more envs per actor is the"
                " cheaper way to more samples)",
                self.n_actors,
                cores,
                self.nice,
            )
        self.channel = ctx.Queue(maxsize=self.queue_size)
        self.stop_event = ctx.Event()
        self.actors = [ActorRecord(process=None) for _ in range(self.n_actors)]
        for record, saved in zip(self.actors, resume or [], strict=False):
            record.incarnation = int(saved["incarnation"]) + 1
            record.received, record.episodes = int(saved["received"]), int(saved["episodes"])
            record.return_sum, record.env_steps = (
                float(saved["return_sum"]),
                int(saved["env_steps"]),
            )
        for index in range(self.n_actors):
            self._spawn(index)

    def _spawn(self, index: int) -> None:
        record = self.actors[index]
        spec = ActorSpec(
            index,
            record.incarnation,
            self.n_envs_per_actor,
            self.n_buffer,
            self.epsilons()[index],
            record.env_steps,
        )
        assert self._ctx is not None
        process = self._ctx.Process(
            target=actor_main,
            args=(spec, self._config, self._weights, self.channel, self.stop_event),
            name=f"border-actor-{index}",
        )
        process.start()
        lower_priority(process.pid, self.nice)
        record.process = process

    def poll(self, timeout: float, max_reports: int = 64) -> list[ActorReport]:
        """Reports waiting in the queue: waits up to ``timeout`` for the first, then takes what is there."""
        reports: list[ActorReport] = []
        try:
            reports.append(
                self.channel.get(timeout=timeout) if timeout > 0 else self.channel.get_nowait()
            )
            while len(reports) < max_reports:
                reports.append(self.channel.get_nowait())
        except queue_lib.Empty:
            pass
        for report in reports:
            self._account(report)
        return reports

    def _account(self, report: ActorReport) -> None:
        record = self.actors[report.actor]
        if report.kind == "batch":
            assert report.transitions is not None
            record.received += len(report.transitions)
            record.env_steps += report.env_steps
            record.episodes += len(report.episode_returns)
            record.return_sum += sum(report.episode_returns)
        elif report.kind == "bye":
            record.sent += report.sent
            record.dropped += report.dropped
            record.said_bye = True
        elif report.kind == "error":
            log.error("actor %d crashed:\n%s", report.actor, report.error.rstrip())

    def check(self) -> None:
        """Restart actors that died; raise :class:`ActorFailure` past ``max_restarts``."""
        if self._stopped:
            return
        for index, record in enumerate(self.actors):
            process = record.process
            if process.is_alive():
                continue
            process.join(timeout=1)
            if record.restarts >= self.max_restarts:
                raise ActorFailure(
                    f"actor {index} died (exit code {process.exitcode}) after {record.restarts} restarts"
                    f" (actor_manager.max_restarts={self.max_restarts}); see the log for its traceback"
                )
            record.restarts += 1
            record.incarnation += 1
            log.warning(
                "actor %d died (exit code %s): restart %d of %d",
                index,
                process.exitcode,
                record.restarts,
                self.max_restarts,
            )
            self._spawn(index)

    def queue_depth(self) -> int:
        """Reports waiting in the queue (approximate)."""
        try:
            return self.channel.qsize()
        except NotImplementedError:  # macOS
            return -1

    def alive(self) -> int:
        """Actor processes currently alive."""
        return sum(1 for r in self.actors if r.process is not None and r.process.is_alive())

    def restarts(self) -> int:
        """Restarts so far, all actors together."""
        return sum(r.restarts for r in self.actors)

    def stop(
        self, on_report: Any = None, drain_timeout: float = 10.0, join_timeout: float = 5.0
    ) -> None:
        """Staged, idempotent shutdown: signal stop, drain until every actor said bye, join, terminate, kill.

        Args:
            on_report: called with each report drained during shutdown (e.g. to store its batch).
            drain_timeout: seconds to wait for the byes.
            join_timeout: seconds to wait at each of join, terminate and kill.
        """
        if not self.actors:
            return
        started = [r for r in self.actors if r.process is not None]
        if (
            not self._stopped
        ):  # a second call (e.g. after Ctrl-C mid-drain) goes straight to reaping
            self._stopped = True
            self.stop_event.set()
            self._drain(started, on_report, drain_timeout)
        self._reap([r.process for r in started], join_timeout)

    def _drain(self, started: list[ActorRecord], on_report: Any, drain_timeout: float) -> None:
        """Take reports until every live actor said bye (or the timeout)."""
        waiting = [r for r in started if r.process.is_alive()]
        deadline = time.monotonic() + drain_timeout
        while time.monotonic() < deadline:
            for report in self.poll(timeout=0.1):
                if on_report is not None:
                    on_report(report)
            if all(r.said_bye or not r.process.is_alive() for r in waiting):
                break
        for report in self.poll(timeout=0):  # whatever the last exits flushed
            if on_report is not None:
                on_report(report)

    def _reap(self, processes: list[Any], join_timeout: float) -> None:
        """Join, then terminate, then kill what is still alive; close the queue."""
        if not any(p.is_alive() for p in processes) and self._closed:
            return
        _join_all(processes, join_timeout)
        for p in processes:
            if p.is_alive():
                log.warning("actor %s did not exit: terminating", p.name)
                p.terminate()
        _join_all(processes, join_timeout)
        for p in processes:
            if p.is_alive():
                log.error("actor %s ignored SIGTERM: killing", p.name)
                p.kill()
                p.join(timeout=join_timeout)
        if not self._closed:
            self._closed = True
            self.channel.close()
            self.channel.cancel_join_thread()

    def accounting(self) -> dict[str, int]:
        """Transitions sent (per the actors' byes), received and dropped, all actors together."""
        return {
            "sent": sum(r.sent for r in self.actors),
            "received": sum(r.received for r in self.actors),
            "dropped": sum(r.dropped for r in self.actors),
        }


def _join_all(processes: list[Any], timeout: float) -> None:
    """Wait up to ``timeout`` seconds in total for every process to exit (and reap those that did)."""
    deadline = time.monotonic() + timeout
    while True:
        sentinels = [p.sentinel for p in processes if p.is_alive()]
        left = deadline - time.monotonic()
        if not sentinels or left <= 0:
            break
        multiprocessing.connection.wait(sentinels, timeout=left)
    for p in processes:
        if not p.is_alive():
            p.join(timeout=0)
