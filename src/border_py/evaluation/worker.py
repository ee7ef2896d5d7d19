"""Evaluation in its own process, so the learner never stops optimizing to evaluate: the
learner's handle on it (the process itself: :mod:`border_py.evaluation.process`).

The learner writes the weights of opt step N into a shared-memory buffer and sends an
:class:`~border_py.transport.messages.EvalRequest`; the evaluator plays the episodes and answers
with an :class:`~border_py.transport.messages.EvalDone` tagged with N. At most one request is in
flight: a request made while the evaluator is busy is refused (and logged by the caller) rather
than queued. The evaluator beats a heartbeat at every env step; one that dies or stays silent for
``heartbeat_timeout`` seconds is restarted like an actor (counted against ``max_restarts``) and
given the request in flight again.
"""

from __future__ import annotations

import contextlib
import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from border_py.errors import RunError
from border_py.evaluation.evaluator import EvalResult
from border_py.evaluation.process import EvalLinks, EvalSettings, eval_main
from border_py.evaluation.service import EvalOutcome, Snapshot
from border_py.processes.children import Context, lower_priority, start_process
from border_py.processes.supervision import Heartbeats, RestartPolicy, exit_cause
from border_py.transport.channel import Readable, receive, send
from border_py.transport.messages import EvalDone, EvalRequest, WorkerFailed
from border_py.transport.weights import SharedWeights

__all__ = ["EvalWorker"]

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    request: EvalRequest
    policy: dict[str, torch.Tensor]
    snapshot: tuple[dict[str, Any], Any]


class EvalWorker:
    """The learner's handle on the evaluator process.

    Args:
        ctx: the multiprocessing context.
        config: the resolved run config.
        settings: episodes, seed, step cap.
        policy: the policy's weights (their shapes size the shared buffer).
        max_restarts: restarts allowed before the run aborts.
        heartbeat_timeout: seconds of silence before the evaluator is killed and restarted.
        nice: the evaluator's niceness (Unix; each incarnation's), so that the learner keeps its
            core while an evaluation runs beside it (0: the learner's priority).
    """

    def __init__(
        self,
        ctx: Context,
        config: dict[str, Any],
        settings: EvalSettings,
        policy: dict[str, torch.Tensor],
        max_restarts: int,
        heartbeat_timeout: float,
        nice: int = 0,
    ) -> None:
        self.ctx, self.config, self.settings = ctx, config, settings
        self.heartbeat_timeout, self.nice = heartbeat_timeout, nice
        self.weights = SharedWeights.create(ctx, policy)
        self.heartbeats = Heartbeats.create(ctx, 1)
        self.stopping = ctx.RawValue("b", 0)
        self.policy = RestartPolicy("the evaluator", max_restarts)
        self.pending: _Pending | None = None
        self.delivered = 0  # results of the current incarnation
        self.error: str | None = None  # what the current incarnation reported
        self._late: list[EvalOutcome] = []  # finished before its evaluator died; read by check()
        self._closed = False
        self.server: int | None = None  # the forkserver that forked the evaluator (None: spawned)
        self._spawn()

    def _spawn(self) -> None:
        requests_r, self.requests = self.ctx.Pipe(duplex=False)
        self.results, results_w = self.ctx.Pipe(duplex=False)
        links = EvalLinks(requests_r, results_w, self.weights, self.heartbeats, self.stopping)
        self.process = self.ctx.Process(
            target=eval_main, args=(self.config, self.settings, links), name="border-evaluator"
        )
        self.heartbeats.beat(0)
        self.server = start_process(self.ctx, self.process)
        assert self.process.pid is not None  # started
        lower_priority(self.process.pid, self.nice)
        requests_r.close()
        results_w.close()
        self.readable = Readable(self.results)
        self.delivered, self.error = 0, None
        if self.pending is not None:  # the restarted evaluator takes over the request in flight
            send(self.requests, self.pending.request)

    @property
    def busy(self) -> bool:
        """Whether an evaluation is in flight, or finished and not yet collected by :meth:`poll`."""
        return self.pending is not None or bool(self._late)

    def request(
        self,
        opt_steps: int,
        env_steps: int,
        policy: dict[str, torch.Tensor],
        snapshot: Snapshot,
        seeds: range | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Ask for an evaluation of ``policy`` (the weights of ``opt_steps``) on ``seeds`` (None:
        the selection evaluations' own); False if busy.

        ``snapshot()`` is taken now (a copy): it comes back with the result. ``stop`` is not
        needed: this returns at once, and a caller that stops stops polling.
        """
        if self.busy:
            return False
        agent_state, trainer_state = snapshot()
        version = self.weights.publish(policy, opt_steps)
        request = EvalRequest(
            opt_steps=opt_steps, env_steps=env_steps, version=version, seeds=seeds
        )
        self.pending = _Pending(request, policy, (copy.deepcopy(agent_state), trainer_state))
        # a dead evaluator has no reader: check() restarts it and the next one takes the request
        with contextlib.suppress(OSError):
            send(self.requests, request)
        return True

    def poll(self, timeout: float = 0.0) -> list[EvalOutcome]:
        """Finished evaluations (at most one), waiting up to ``timeout`` for it.

        With none in flight it returns at once without a look at the pipe (the learner asks every
        opt step): an idle evaluator sends nothing but its traceback, which :meth:`check` reads.
        """
        if self._late:  # its evaluator died after sending it: check() read it
            late, self._late = self._late, []
            return late
        if self.pending is None:
            return []
        return self._read(timeout)

    def _read(self, timeout: float) -> list[EvalOutcome]:
        """What the evaluator sent: its results (as outcomes) and its traceback (logged)."""
        if self._closed or not self.readable(timeout):
            return []
        try:
            messages = receive(self.results, 4, self.readable)
        except (EOFError, OSError):
            return []  # it died: check() restarts it
        done = []
        for message in messages:
            if isinstance(message, WorkerFailed):
                log.error("the evaluator crashed:\n%s", message.error.rstrip())
                self.error = message.exception
            elif isinstance(message, EvalDone) and self.pending is not None:
                pending, self.pending = self.pending, None
                self.delivered += 1
                result = EvalResult(
                    message.return_mean,
                    message.return_std,
                    message.return_min,
                    message.return_max,
                    message.length_mean,
                    list(message.returns),
                    message.seeds,
                    list(message.lengths),
                )
                done.append(
                    EvalOutcome(
                        message.opt_steps,
                        message.env_steps,
                        result,
                        pending.policy,
                        _snapshot(pending.snapshot),
                    )
                )
        return done

    def check(self) -> None:
        """Restart the evaluator if it died or went silent; raise RunError when it may not."""
        if self._closed:
            return
        if self.process.is_alive():
            silent = self.heartbeats.silent_for(0)
            if silent <= self.heartbeat_timeout:
                return
            log.error(
                "the evaluator silent for %.1f s (actor_manager.heartbeat_timeout=%g): killing it",
                silent,
                self.heartbeat_timeout,
            )
            self.process.kill()
            self.process.join(timeout=5)
            cause, exitcode = f"silent for {silent:.1f} s", None
        else:
            self.process.join(timeout=1)
            cause, exitcode = exit_cause(self.process.exitcode, self.server)
        self._late += self._read(0)  # what it said before dying: its traceback, or a result
        error = self.error
        self.requests.close()
        self.results.close()
        verdict = self.policy.verdict(cause, error, self.delivered > 0, exitcode)
        if verdict is not None:
            self._closed = True
            raise RunError(verdict)
        log.warning(
            "the evaluator died (%s): restart %d of %d",
            cause,
            self.policy.restarts,
            self.policy.max_restarts,
        )
        self._spawn()

    def restarts(self) -> int:
        """Restarts so far."""
        return self.policy.restarts

    def close(self, timeout: float = 5.0) -> None:
        """Ask the evaluator to exit, then join, then kill (idempotent)."""
        if self._closed and not self.process.is_alive():
            return
        self._closed = True
        self.stopping.value = 1
        self.requests.close()  # wakes the evaluator waiting for a request: EOF, it exits at once
        self.process.join(timeout=timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=timeout)
        self.results.close()


def _snapshot(state: tuple[dict[str, Any], Any]) -> Snapshot:
    """A snapshot taken earlier, as the callable :class:`EvalOutcome` holds."""
    return lambda: state
