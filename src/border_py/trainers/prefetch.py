"""The learner's prefetch (``trainer.prefetch``): replay sampling, batch assembly and the copy to
the device run ahead in a background thread, and priorities go back to the buffer one step late.

At ``trainer.prefetch=0`` the loop runs :func:`border_py.trainers.loop.learn_step` (sample,
update, priorities: one after the other, a device sync per opt step on a GPU). At ``depth > 0``
a daemon thread keeps up to ``depth`` batches sampled and converted ahead of the update
(:class:`~border_py.agents.batch.TensorBatch`, or for a recurrent agent's sequences a
:class:`~border_py.agents.sequence_batch.SequenceBatch`; on CUDA staged in page-locked memory and
copied with ``non_blocking=True`` on a stream of its own, the update's stream waiting on an
event), and the update's TD errors (a sequence's priority) stay on the device until the next opt
step.

Staleness, the bounds the tests assert:

- A batch used at opt step ``t`` was sampled after opt step ``t - depth - 1`` ended: at most
  ``depth`` opt steps early (a credit is returned when a batch is taken, so the thread samples
  the next one while the update runs).
- The priorities of opt step ``t`` are written back during opt step ``t + 1``: by the thread,
  when step ``t + 1`` takes its batch and returns a credit, before it samples the next batch
  (off the learner's critical path: the update of step ``t + 1`` runs meanwhile), or by the
  learner after its update was queued if the thread has not got to them (on a GPU the read
  waits only for step ``t``'s work, via an event): at most one step late, each step's once and
  in order (the swap and the write hold the lock). So the batch of step ``t + depth + 1`` is
  the first one sampled with them, and the last step's priorities are written when the loop
  stops or saves.

This is Ape-X's arrangement (Horgan et al. 2018): there the learner's priority updates reach the
replay asynchronously too, while actors keep adding to it; priorities a few steps old change the
sampling distribution negligibly against a buffer of many thousand rows.

The buffer is shared: the loop's ``ingest`` pushes on the main thread while the thread samples.
One lock (:attr:`Prefetcher.lock`, re-entrant) serializes the buffer's ``push``, ``sample``,
``update_priorities`` and the checkpoint's reads of it: a sample copies its rows (numpy's
fancy indexing makes new arrays) under the lock, so no row is torn and the sum tree is never
read mid-update; the conversion to tensors runs outside it. A row that a push overwrites between
its sample and its priorities' write-back keeps the new transition's priority: the thread notes
the buffer's :attr:`~border_py.replay.base.OverwriteTracking.rows_written` with each sample,
and the write-back skips the rows written since
(:meth:`~border_py.replay.ring.RowRing.overwritten`).

The thread never outlives the learner: it is a daemon, every wait has a timeout
(:data:`WAIT_SECONDS`), and the loop closes it (stop, join with :data:`JOIN_TIMEOUT`) when it
ends, on an exception and on Ctrl-C; a stop requested while the learner awaits a batch ends the
wait at once, without an opt step. An exception in the thread is raised in the learner at its
next batch as a :class:`PrefetchError` naming it (a :class:`~border_py.errors.RunError` from a
write-back, non-finite TD errors, as itself: the one line it is without prefetch). The thread does numpy work mostly (numpy
releases the GIL in its large copies) and a few tensor conversions; torch's thread count stays
the learner's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
import torch

from border_py.agents.base import Agent, TensorUpdate
from border_py.agents.batch import TensorBatch
from border_py.agents.sequence_batch import SequenceBatch
from border_py.errors import RunError
from border_py.replay.base import OverwriteTracking, PrioritizedReplay, ReplayBuffer
from border_py.sequences import Sequences
from border_py.transitions import Transitions

__all__ = ["PrefetchError", "Prefetcher", "build_prefetcher"]

log = logging.getLogger(__name__)

WAIT_SECONDS = 0.1  # every blocking wait's timeout: stops and failures are seen this often
TAKE_TIMEOUT = 300.0  # the longest the learner waits for one batch before it gives up
JOIN_TIMEOUT = 5.0  # the longest closing waits for the thread to end


class Tracked(PrioritizedReplay, OverwriteTracking, Protocol):
    """A prioritized buffer that tells overwritten rows: the one a prefetch writes back to."""


class PrefetchError(RuntimeError):
    """The prefetch thread failed (its exception is the cause) or stopped."""


@dataclass
class Prepared:
    """A batch sampled and converted ahead.

    Attributes:
        batch: its tensors on the agent's device (a :class:`SequenceBatch` for sequences).
        index: its rows in the buffer (prioritized), else None.
        mark: the buffer's ``rows_written`` when it was sampled.
        sampled_at: batches taken (opt steps of the prefetcher) when it was sampled.
        ready: (CUDA) the event recorded after its copy, on the thread's stream.
    """

    batch: TensorBatch | SequenceBatch
    index: np.ndarray | None
    mark: int
    sampled_at: int
    ready: Any = None


@dataclass
class Pending:
    """One opt step's TD errors, waiting for the next step to be written back."""

    index: np.ndarray
    mark: int
    td_error: torch.Tensor  # on the host (pinned, filled without blocking, on CUDA)
    ready: Any = None  # (CUDA) the event recorded after the copy to the host


class Prefetcher:
    """The batch pipeline with prefetch (see the module docstring).

    Args:
        agent: the learner's agent (with :class:`~border_py.agents.base.TensorUpdate`).
        buffer: the replay buffer (prioritized ones with
            :class:`~border_py.replay.base.OverwriteTracking`).
        depth: batches sampled ahead at most (>= 1).
        stop_requested: whether the run was asked to stop (a Ctrl-C): waiting for a batch ends
            then, without an opt step.
    """

    def __init__(
        self,
        agent: TensorUpdate,
        buffer: ReplayBuffer,
        depth: int,
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        self.agent, self.buffer, self.depth = agent, buffer, depth
        self.stop_requested = stop_requested
        self.batch_size = int(getattr(agent, "batch_size"))  # noqa: B009 (Agent's attribute)
        self.lock = threading.RLock()
        self.taken = 0  # batches taken by learn()
        self.early = 0  # how many opt steps early the latest batch was sampled
        self._queue: queue.Queue[Prepared] = queue.Queue()
        self._credits = threading.Semaphore(depth)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._pending: Pending | None = None
        self._cuda = agent.device.type == "cuda"
        self._stream: Any = None

    def learn(self) -> dict[str, Any] | None:
        """One opt step on the next prefetched batch; the previous step's priorities written back
        after it was queued. Returns the update's metrics without ``td_error``, or None: a stop
        was requested while the batch was awaited (no step made).

        Raises:
            PrefetchError: the thread failed or stopped.
        """
        item = self._take()
        if item is None:
            return None
        # a SequenceBatch goes to an agent that learns on sequences (its update_tensors takes it)
        metrics = self.agent.update_tensors(item.batch)  # type: ignore[arg-type]
        td_error = metrics.pop("td_error", None)
        pending = None
        if item.index is not None:
            if td_error is None:
                raise RuntimeError(
                    f"{type(self.agent).__name__}.update_tensors returned no 'td_error' for a"
                    " prioritized batch"
                )
            pending = self._keep(item.index, item.mark, td_error)
        self._settle()
        with self.lock:  # the previous step's, unless the thread has written them already
            previous, self._pending = self._pending, pending
            self._write_back(previous)
        self.early = self.taken - 1 - item.sampled_at
        return metrics

    def flush(self) -> None:
        """Write back the priorities still pending (the latest step's), skipping the rows
        overwritten since they were sampled."""
        self._settle()
        with self.lock:
            pending, self._pending = self._pending, None
            self._write_back(pending)

    def _settle(self) -> None:
        """Wait for the pending step's TD errors (on CUDA) before the buffer's lock is taken, so
        that the write-back under it does not hold the learner's pushes while kernels run (a
        step the other side writes meanwhile has been waited for all the same)."""
        pending = self._pending
        if pending is not None and pending.ready is not None:
            pending.ready.synchronize()

    def _write_back(self, pending: Pending | None) -> None:
        """Write ``pending`` (taken from :attr:`_pending` under the lock, still held: each
        step's priorities are written once, in the order of the steps)."""
        if pending is None:
            return
        if pending.ready is not None:
            pending.ready.synchronize()
        td_error = pending.td_error.numpy()
        buffer = cast(Tracked, self.buffer)  # build_prefetcher made sure
        keep = ~buffer.overwritten(pending.index, pending.mark)
        buffer.update_priorities(pending.index[keep], td_error[keep])

    def close(self, flush: bool) -> None:
        """Stop and join the thread, drop the batches sampled ahead; ``flush``: write back the
        pending priorities (not after an error, which it could hide)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(JOIN_TIMEOUT)
            if thread.is_alive():
                log.warning("the prefetch thread did not stop within %gs", JOIN_TIMEOUT)
        while not self._queue.empty():
            self._queue.get_nowait()
        if flush:
            self.flush()
        self._pending = None

    # -- the thread ------------------------------------------------------------------------

    def _start(self) -> None:
        if self._cuda:
            self._stream = torch.cuda.Stream(self.agent.device)
        self._thread = threading.Thread(target=self._run, name="border-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self._credits.acquire(timeout=WAIT_SECONDS):
                    self.flush()  # the step before the one that returned this credit
                    self._queue.put(self._prepare(), timeout=WAIT_SECONDS)
        except BaseException as exc:  # raised in the learner at its next batch
            self._error = exc

    def _prepare(self) -> Prepared:
        with self.lock:
            batch = self.buffer.sample(self.batch_size)
            mark = getattr(self.buffer, "rows_written", 0)
            sampled_at = self.taken
        if not self._cuda:
            return Prepared(self._tensors(batch, pinned=False), batch.index, mark, sampled_at)
        with torch.cuda.stream(self._stream):
            tensors = self._tensors(batch, pinned=True)
            ready = torch.cuda.Event()
            ready.record(self._stream)
        return Prepared(tensors, batch.index, mark, sampled_at, ready)

    def _tensors(self, batch: Transitions | Sequences, pinned: bool) -> TensorBatch | SequenceBatch:
        """``batch`` on the agent's device: a :class:`SequenceBatch` for sequences (a recurrent
        agent's, :mod:`border_py.agents.r2d2`), else a :class:`TensorBatch`."""
        device = self.agent.device
        if isinstance(batch, Sequences):
            return SequenceBatch.of(batch, device, pinned)
        return TensorBatch.of(batch, device, self.agent.discrete_actions, pinned)

    # -- the learner's side ------------------------------------------------------------------

    def _take(self) -> Prepared | None:
        if self._thread is None:
            self._start()  # at the first opt step: the gate has let the buffer fill
        deadline = time.monotonic() + TAKE_TIMEOUT
        while True:
            try:
                item = self._queue.get(timeout=WAIT_SECONDS)
                break
            except queue.Empty:
                if self.stop_requested():
                    return None
                self._check(deadline)
        with self.lock:
            self.taken += 1
        self._credits.release()  # the thread samples the next batch while this one trains
        if item.ready is not None:  # the update's stream waits for the copy, not the host
            stream = torch.cuda.current_stream(self.agent.device)
            stream.wait_event(item.ready)
            for tensor in item.batch.tensors():
                tensor.record_stream(stream)
        return item

    def _check(self, deadline: float) -> None:
        if isinstance(self._error, RunError):  # diverged priorities: as without prefetch
            raise self._error
        if self._error is not None:
            raise PrefetchError(f"the prefetch thread failed: {self._error!r}") from self._error
        if self._thread is None or not self._thread.is_alive():
            raise PrefetchError("the prefetch thread stopped")
        if time.monotonic() > deadline:
            raise PrefetchError(f"the prefetch thread made no batch in {TAKE_TIMEOUT:g}s")

    def _keep(self, index: np.ndarray, mark: int, td_error: torch.Tensor) -> Pending:
        td_error = td_error.detach()
        if not self._cuda:
            return Pending(index, mark, td_error.cpu())
        host = torch.empty(td_error.shape, dtype=td_error.dtype, pin_memory=True)
        host.copy_(td_error, non_blocking=True)
        ready = torch.cuda.Event()
        ready.record(torch.cuda.current_stream(self.agent.device))  # the copy's stream
        return Pending(index, mark, host, ready)


def build_prefetcher(
    depth: int, agent: Agent, buffer: ReplayBuffer, stop_requested: Callable[[], bool]
) -> Prefetcher | None:
    """The prefetcher of ``trainer.prefetch=depth``, or None: depth 0, or an agent or buffer
    that cannot take part (said in one log line; the loop then runs without prefetch).
    ``stop_requested``: see :class:`Prefetcher`."""
    if depth == 0:
        return None
    name = f"trainer.prefetch={depth}"
    if not isinstance(agent, TensorUpdate):
        log.info(
            "%s: %s has no update_tensors (agents/base.py's TensorUpdate): no prefetch",
            name,
            type(agent).__name__,
        )
        return None
    tracked = isinstance(buffer, PrioritizedReplay) and isinstance(buffer, OverwriteTracking)
    if buffer.needs_td_errors and not tracked:
        log.info(
            "%s: %s cannot tell overwritten rows (replay/base.py's OverwriteTracking): no prefetch",
            name,
            type(buffer).__name__,
        )
        return None
    log.info(
        "%s: batches sampled up to %d opt steps ahead, priorities one step late; a run is not"
        " bit for bit reproducible and a resume not exact (both are at trainer.prefetch=0)",
        name,
        depth,
    )
    return Prefetcher(agent, buffer, depth, stop_requested)
