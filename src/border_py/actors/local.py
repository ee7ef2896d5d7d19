"""The default ``actor_manager``: actor processes on the learner's machine.

:class:`LocalActorSettings` are their settings, :class:`LocalActors` their runtime: it starts
``n_actors`` actor processes from one multiprocessing context, each with its own channel
(:mod:`border_py.transport.channel`: shared-memory slots, a notices pipe and a credits pipe) and a
heartbeat. It hands batches to the learner as they are announced (the data in:
:mod:`border_py.actors.incarnation`), restarts an actor that died or went silent for
``heartbeat_timeout`` seconds (a hung env, a deadlock) with a fresh incarnation, ends the run in
one line when a restart cannot help (:class:`~border_py.processes.supervision.RestartPolicy`), and
shuts the actors down in stages.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import torch

from border_py.actors.clock import SharedClock
from border_py.actors.incarnation import Incarnation, Notices
from border_py.actors.process import ActorLinks, actor_main
from border_py.actors.runtime import Deliver, Launch, accounting_of, slots_state
from border_py.actors.sampler import sampler_options
from border_py.actors.settings import ActorSettings
from border_py.agents.base import Agent, RecurrentActing
from border_py.agents.precision import for_local_actors
from border_py.config import niceness, require
from border_py.processes.children import (
    Context,
    end_in_stages,
    forkserver_context,
    lower_priority,
    start_process,
)
from border_py.processes.supervision import Heartbeats, exit_cause
from border_py.resources import (
    actors_per_core,
    open_files,
    shared_memory,
    size_text,
    usable_cores,
)
from border_py.transport.channel import SlotRing
from border_py.transport.layout import BatchLayout, SequenceShape
from border_py.transport.weights import SharedWeights

__all__ = ["LocalActorSettings", "LocalActors"]

log = logging.getLogger(__name__)

EXIT_GRACE_SECONDS = 2.0  # after the drain: how long an actor may take to exit before SIGTERM
RETIRE_SECONDS = 2.0  # how long the messages of a dead actor are read before it is replaced


@dataclass(kw_only=True)
class LocalActorSettings(ActorSettings):
    """Actor processes on this machine (the ``actor_manager=default`` option); their runtime is
    :class:`LocalActors`. Their other keys: see
    :class:`~border_py.actors.settings.ActorSettings`.

    Args:
        nice: niceness increment of the actor processes (Unix), so that on a machine with few
            cores the learner keeps its share of CPU however many actors run (0: same priority).
        start_method: ``forkserver`` (children fork from a server that imported border-py once:
            fast starts, fast restarts) or ``spawn`` (every child imports everything anew).
    """

    nice: int
    start_method: str

    def __post_init__(self) -> None:
        super().__post_init__()
        methods = [m for m in ("forkserver", "spawn") if m in mp.get_all_start_methods()]
        require(
            "start_method", self.start_method in methods, f"one of {methods}", self.start_method
        )
        niceness("nice", self.nice)

    def runtime(self) -> LocalActors:
        """The actor processes these settings configure (none started yet)."""
        return LocalActors(self)

    def context(self) -> Context:
        """The multiprocessing context every child of the run starts from."""
        if self.start_method == "forkserver":  # each child is a cheap fork of a preloaded server
            return forkserver_context()
        return cast(Context, mp.get_context(self.start_method))

    def layout(
        self, config: dict[str, Any], spaces: tuple[gym.Space, gym.Space], agent: Agent
    ) -> BatchLayout:
        """The layout of one slot: the largest batch an actor of this run can send (a recurrent
        agent's: ``n_buffer`` sequences and what one more vector step may add)."""
        options = sampler_options(config)
        if isinstance(agent, RecurrentActing):
            state = tuple(agent.initial_state(1).shape[1:])
            shape = SequenceShape(agent.burn_in, agent.length, agent.period, agent.n_step, state)
            return BatchLayout.for_sequences(
                spaces[0], self.n_buffer, self.n_envs_per_actor, shape, options["priorities"]
            )
        return BatchLayout.for_batches(
            *spaces,
            self.n_buffer,
            self.n_envs_per_actor,
            agent.n_step,
            options["frame_stack"],
            options["priorities"],
        )

    def check_resources(
        self,
        config: dict[str, Any],
        spaces: tuple[gym.Space, gym.Space],
        agent: Agent,
        enforce: bool,
    ) -> None:
        """Also bound the actor processes by this machine's cores, the learner's open files
        (ulimit -n), and the slots of every actor by the room free in ``/dev/shm``."""
        super().check_resources(config, spaces, agent, enforce)
        actors_per_core(self.n_actors, usable_cores(), "usable CPU cores", enforce)
        open_files(self.n_actors, enforce)
        slot, slots = self.layout(config, spaces, agent).nbytes, self.n_actors * self.queue_size
        shared_memory(
            f"actor_manager.n_actors={self.n_actors} x queue_size={self.queue_size}",
            f"{slots} slots of {size_text(slot)} (n_buffer={self.n_buffer},"
            f" n_envs_per_actor={self.n_envs_per_actor})",
            slots * slot,
            enforce,
        )


class LocalActors:
    """The actor processes of a run on this machine, as :class:`LocalActorSettings` configure
    them (an :class:`~border_py.actors.runtime.Actors`).

    Args:
        settings: the ``actor_manager`` group.
    """

    def __init__(self, settings: LocalActorSettings) -> None:
        self.settings = settings
        self.records, self.kept, self._policies = settings.slots(None)  # kept: see slots
        self._running: list[Incarnation | None] = []
        self._ctx: Context | None = None
        self._stopped = False
        self._halted = False  # the budget is reached: the actors are ending
        self._notices = Notices()

    # -- start and weights -------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        """Allocate the channels and weights, then start every actor (they wait for weights)."""
        settings, n = self.settings, self.settings.n_actors
        ctx = self._ctx = settings.context()
        self._config, self._seed = launch.config, launch.seed
        self._dtype, acting = for_local_actors(settings.policy_dtype, launch.agent)
        if n > (cores := usable_cores()):
            log.warning(
                "%d actors on %d CPU cores: actors, learner and evaluator share them (the actors"
                " run at nice %d, so the learner keeps its share); for more samples: a fast env,"
                " more envs per actor (or env.backend=envpool for Atari); a slow env (its step"
                " waits, e.g. a simulator), env.backend=gymnasium_async (an actor's envs step one"
                " after another otherwise)",
                n,
                cores,
                settings.nice,
            )
        layout = settings.layout(launch.config, launch.spaces, launch.agent)
        self.rings = [SlotRing.create(ctx, layout, settings.queue_size) for _ in range(n)]
        self.weights = SharedWeights.create(ctx, launch.policy)
        self.weights.publish(launch.policy, launch.opt_steps)
        self.heartbeats = Heartbeats.create(ctx, n)
        self.stopping = ctx.RawValue("b", 0)
        self.clock = SharedClock.create(ctx, n, launch.env_steps)
        self._running = [None] * n
        for index in range(n):
            self._spawn(index)
        log.info("started %d actors x %d envs, acting in %s", n, settings.n_envs_per_actor, acting)

    def _spawn(self, index: int) -> None:
        assert self._ctx is not None
        record = self.records[index]
        record.begin_incarnation()
        spec = self.settings.spec(index, record, self._seed, self._dtype)
        record.policy_dtype = spec.policy_dtype
        notices_r, notices_w = self._ctx.Pipe(duplex=False)
        credits_r, credits_w = self._ctx.Pipe(duplex=False)
        shared = (self.weights, self.heartbeats, self.stopping, self.clock.slot(index))
        links = ActorLinks(self.rings[index], notices_w, credits_r, *shared)
        process = self._ctx.Process(
            target=actor_main, args=(spec, self._config, links), name=f"border-actor-{index}"
        )
        self.heartbeats.beat(index)  # the grace period starts now
        server = start_process(self._ctx, process)
        notices_w.close()  # the child holds these ends now: EOF when it exits
        credits_r.close()
        assert process.pid is not None  # started
        lower_priority(process.pid, self.settings.nice)
        self._running[index] = Incarnation(process, notices_r, credits_w, server)

    def publish(self, policy: dict[str, torch.Tensor], opt_steps: int) -> None:
        """Write the weights into shared memory; each actor takes them before its next batch."""
        self.weights.publish(policy, opt_steps)

    # -- data in -----------------------------------------------------------------------------

    def poll(self, timeout: float, deliver: Deliver) -> int:
        """Hand announced batches to ``deliver`` (waiting up to ``timeout`` for the first)."""
        return sum(self._read(i, deliver) for i in self._notices.ready(self._running, timeout))

    def _read(self, index: int, deliver: Deliver | None) -> int:
        """Take the messages waiting from actor ``index``; note EOF (the actor is gone)."""
        run = self._running[index]
        assert run is not None
        return run.read(index, self.rings[index], self.records[index], deliver)

    def halt(self) -> None:
        """Raise the stop flag: each actor sends the batch it is sampling (a slot free) and says
        goodbye; :meth:`check` restarts none of them."""
        self._halted = True
        self.stopping.value = 1

    # -- health ------------------------------------------------------------------------------

    def check(self) -> None:
        """Restart actors that died or stayed silent too long; raise :class:`ActorFailure` when a
        restart cannot help."""
        if self._stopped or self._halted:
            return
        for index, run in enumerate(self._running):
            if run is None:
                continue
            process = run.process
            if process.is_alive():
                silent = self.heartbeats.silent_for(index)
                if silent <= self.settings.heartbeat_timeout:
                    continue
                log.error(
                    "actor %d silent for %.1f s (actor_manager.heartbeat_timeout=%g): killing it",
                    index,
                    silent,
                    self.settings.heartbeat_timeout,
                )
                process.kill()
                process.join(timeout=5)
                cause, exitcode = f"silent for {silent:.1f} s", None
            else:
                process.join(timeout=1)
                cause, exitcode = exit_cause(process.exitcode, run.server)
            self._replace(index, cause, exitcode)

    def _replace(self, index: int, cause: str, exitcode: int | None) -> None:
        """Retire a dead incarnation (taking what it left in its pipe) and start the next one."""
        run = self._running[index]
        assert run is not None
        deadline = time.monotonic() + RETIRE_SECONDS
        while not run.closed and time.monotonic() < deadline:  # up to its pipe's end
            self._read(index, self._deliver_late)
            if not run.closed:
                run.notices.poll(0.05)
        if not run.closed:  # a process it forked holds the pipe's write end
            log.warning(
                "actor %d: its pipe is still open %.0f s after its death (a process it started"
                " holds it); retiring it with what it sent",
                index,
                RETIRE_SECONDS,
            )
        record = self.records[index]
        if not record.said_bye:
            record.end_incarnation(None)
        error = record.incarnation_error
        run.close()
        self._running[index] = None
        self._notices.forget()
        record.restart_or_fail(index, self._policies[index], cause, error, exitcode)
        self._spawn(index)

    # -- stop --------------------------------------------------------------------------------

    def stop(self, deliver: Deliver | None = None, drain_timeout: float = 10.0) -> None:
        """Staged, idempotent shutdown: set the stop flag, take batches until every actor said
        goodbye (or the timeout), then join, terminate and kill what is left."""
        if not self._running:
            return
        if not self._stopped:
            self._stopped = True
            self.stopping.value = 1
            deadline = time.monotonic() + drain_timeout
            while time.monotonic() < deadline and any(
                run is not None and not run.closed and run.process.is_alive()
                for run in self._running
            ):
                self.poll(0.1, deliver or self._deliver_late)
            for index, run in enumerate(self._running):  # what the last exits left
                if run is not None:
                    while not run.closed and run.notices.poll(0):
                        self._read(index, deliver or self._deliver_late)
        self._reap()

    def _deliver_late(self, batch: Any) -> None:
        """Batches that arrive while nobody takes them (an actor being replaced, a failed run)."""

    def _reap(self) -> None:
        processes = [run.process for run in self._running if run is not None]
        # the drain already waited for the goodbyes (or a second Ctrl-C cut it short): an actor
        # that said goodbye exits in well under this; one still alive after it is hung
        end_in_stages(processes, EXIT_GRACE_SECONDS)
        for index, run in enumerate(self._running):
            if run is None:
                continue
            record = self.records[index]
            if not record.said_bye:
                record.end_incarnation(None)
            run.close()
            self._running[index] = None
            self._notices.forget()

    # -- reporting ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The slots' counters."""
        return slots_state(self.records, self.kept)

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue the saved slots' counters (see
        :meth:`~border_py.actors.settings.ActorSettings.slots`)."""
        self.records, self.kept, self._policies = self.settings.slots(saved)

    def accounting(self) -> dict[str, int]:
        """Transitions sent, received and dropped this session; received over all sessions."""
        return accounting_of(self.records, self.kept)

    def alive(self) -> int:
        """Actor processes alive now."""
        return sum(1 for run in self._running if run is not None and run.process.is_alive())

    def restarts(self) -> int:
        """Restarts so far, all actors together."""
        return sum(record.restarts for record in self.records)
