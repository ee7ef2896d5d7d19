"""The learner's book of its calls to Ray actors: what each slot has in flight, and its health.

The learner keeps up to ``max_calls_in_flight`` ``sample`` calls queued or running at each actor;
a finished call's batch is its task result, read by the learner as numpy views of the object
store (no copy until the replay buffer's). At most ``queue_size`` finished batches per actor wait
for the learner; while they do, that actor gets no new call (back-pressure). A call that raised,
an actor or node that died, or a call running longer than ``heartbeat_timeout`` ends the
incarnation (:meth:`Calls.unsound`); the actors then start the slot's next one.
"""

from __future__ import annotations

import logging
import re
import time
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from border_py.errors import first_line
from border_py.transport.weights import RayWeights

__all__ = ["Calls"]

log = logging.getLogger(__name__)

GET_SECONDS = 30.0  # the longest a fetch of a finished call's result may take
START_SECONDS = (
    300.0  # how long an actor may take to start (worker process, runtime_env, placement)
)


@dataclass
class Call:
    """A call the learner made to an actor and has not taken the result of yet."""

    ref: Any  # ray.ObjectRef
    sample: bool  # a sample call (else the node query)
    submitted: float  # time.monotonic()
    finished: float | None = None  # when the learner saw it finish


@dataclass
class Incarnation:
    """The learner's handle on one running incarnation of an actor slot."""

    handle: Any  # ray.actor.ActorHandle
    calls: deque[Call] = field(default_factory=deque)
    version: int = 0  # the weights version sent with its last call
    last_finished: float = 0.0  # when its latest call was seen finished
    failure: tuple[str, str | None] | None = None  # (cause, exception line) once it failed

    def running(self) -> int:
        """Calls queued or running at the actor."""
        return sum(1 for c in self.calls if c.finished is None)

    def waiting(self) -> int:
        """Finished batches waiting for the learner."""
        return sum(1 for c in self.calls if c.sample and c.finished is not None)

    def busy(self, now: float) -> tuple[float, bool]:
        """How long the call the actor runs now has been running (0: none), and whether that
        call is its start (the node query, answered once the actor is up)."""
        call = next((c for c in self.calls if c.finished is None), None)
        if call is None:
            return 0.0, False
        return now - max(call.submitted, self.last_finished), not call.sample

    def overdue(self, index: int, heartbeat_timeout: float) -> str | None:
        """Why actor ``index`` must be killed: its start or its current call ran too long; None
        while it keeps time."""
        silent, starting = self.busy(time.monotonic())
        if starting and silent > max(START_SECONDS, heartbeat_timeout):
            log.error("actor %d not started after %.0f s: killing it", index, silent)
            return f"not started after {silent:.0f} s"
        if not starting and silent > heartbeat_timeout:
            log.error(
                "actor %d silent for %.1f s (actor_manager.heartbeat_timeout=%g): killing it",
                index,
                silent,
                heartbeat_timeout,
            )
            return f"silent for {silent:.1f} s"
        return None


class Calls:
    """The running incarnation of every actor slot (None: none runs) and its calls in flight.

    Args:
        n_actors: the actor slots.
        per_call: about the env steps one sample call takes (where the calls after it explore
            from: :meth:`top_up`).
    """

    def __init__(self, n_actors: int, per_call: int) -> None:
        self.running: list[Incarnation | None] = [None] * n_actors
        self.per_call = per_call

    def begin(self, index: int, handle: Any) -> None:
        """Book slot ``index``'s new incarnation and ask where it runs (answered once it is up)."""
        run = Incarnation(handle)
        run.calls.append(Call(handle.node.remote(), sample=False, submitted=time.monotonic()))
        self.running[index] = run

    def top_up(self, weights: RayWeights, limits: tuple[int, int], received: int) -> None:
        """Give every sound actor new calls up to ``max_calls_in_flight``, unless ``queue_size``
        batches of it already wait for the learner (``limits``); a call carries newer weights,
        if any, and where its exploration starts: the run's env steps the learner ``received``
        plus ``per_call`` env steps for each sample call before it not taken yet."""
        max_calls_in_flight, queue_size = limits
        ahead = sum(c.sample for run in self.running if run is not None for c in run.calls)
        for run in self.running:
            if run is None or run.failure is not None:
                continue
            while run.running() < max_calls_in_flight and run.waiting() < queue_size:
                ref, run.version = weights.since(run.version)
                call = run.handle.sample.remote(ref, received + ahead * self.per_call)
                ahead += 1
                run.calls.append(Call(call, sample=True, submitted=time.monotonic()))

    def outstanding(self) -> dict[Any, int]:
        """The calls of sound actors not taken yet: the slot of each."""
        return {
            call.ref: i
            for i, run in enumerate(self.running)
            if run is not None and run.failure is None
            for call in run.calls
        }

    def see_finished(self, refs: Collection[Any], now: float) -> None:
        """Note which calls finished (their results may not be here yet)."""
        for run in self.running:
            if run is None:
                continue
            for call in run.calls:
                if call.finished is None and call.ref in refs:
                    call.finished = now
                    run.last_finished = now

    def results(self, index: int, here: Collection[Any]) -> Iterator[tuple[Call, Any]]:
        """Take the results of actor ``index``'s calls that are ``here``, in the order it ran
        them; at a failure, note it on the incarnation and stop."""
        import ray
        from ray.exceptions import RayActorError, RayError, RayTaskError

        run = self.running[index]
        assert run is not None
        for call in [c for c in run.calls if c.ref in here]:
            run.calls.remove(call)
            try:
                result = ray.get(call.ref, timeout=GET_SECONDS)
            except RayTaskError as exc:
                log.error("actor %d crashed:\n%s", index, _plain(str(exc)).rstrip())
                cause = exc.cause if isinstance(exc.cause, BaseException) else exc
                run.failure = ("raised an exception", f"{type(cause).__name__}: {cause}")
            except RayActorError as exc:
                if exc.actor_init_failed:  # e.g. border-py missing on its node
                    log.error("actor %d could not start:\n%s", index, str(exc).rstrip())
                run.failure = _died(exc)
            except RayError as exc:  # e.g. its result was lost with its node
                run.failure = (f"its result was lost: {first_line(exc)}", None)
            if run.failure is not None:
                return
            yield call, result

    def unsound(self, heartbeat_timeout: float) -> Iterator[tuple[int, str, str | None]]:
        """Each slot whose incarnation failed, died or ran one call too long (killed here), as
        (slot, cause, exception line), once the calls that finished meanwhile are noted."""
        import ray

        refs = list(self.outstanding())
        if refs:
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
            self.see_finished(set(done), time.monotonic())
        for index, run in enumerate(self.running):
            if run is None:
                continue
            if run.failure is not None:
                yield index, *run.failure
                continue
            cause = run.overdue(index, heartbeat_timeout)
            if cause is not None:
                ray.kill(run.handle, no_restart=True)
                yield index, cause, None

    def alive(self) -> int:
        """Actors running now (not failed)."""
        return sum(1 for run in self.running if run is not None and run.failure is None)


def _died(exc: Any) -> tuple[str, str | None]:
    """(cause, exception line) of a Ray actor that died."""
    if exc.actor_init_failed:  # it would fail the same way again
        return "could not start", first_line(exc)
    return ("its node was preempted" if exc.preempted else "its worker or node died"), None


def _plain(text: str) -> str:
    """``text`` without terminal colour codes (Ray colours the name of a failed task)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)
