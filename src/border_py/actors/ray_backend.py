"""Actors on a Ray cluster: the ``actor_manager=ray`` option (the ``[ray]`` extra).

:class:`RayActors` runs each actor slot as a Ray actor (:class:`SamplerActor`) that steps the same
sampler as a local actor process (:func:`~border_py.actors.process.build_sampler`: envs, a CPU
copy of the agent, Ape-X epsilons, n-step, frames, actor-side priorities), one placement-group
bundle per slot. The learner, its replay buffer and the evaluator stay in this process.

- **Data**: the learner keeps up to ``max_calls_in_flight`` ``sample`` calls queued or running at
  each actor; a finished call's batch is its task result, read by the learner as numpy views of
  the object store (no copy until the replay buffer's). At most ``queue_size`` finished batches
  per actor wait for the learner; while they do, that actor gets no new call (back-pressure).
- **Weights**: each publication is put in the object store at most once (when the first actor
  needs it); an actor whose weights are older gets the reference with its next call, and Ray
  copies the object once per node.
- **Faults**: a call that raised, an actor or node that died, or a call running longer than
  ``heartbeat_timeout`` (killed with ``ray.kill``) ends the incarnation; the slot is started
  again with the next incarnation (fresh env seeds) as the local backend does, under the same
  :class:`~border_py.processes.supervision.RestartPolicy`.
- **Ray itself**: ``address=null`` starts a local Ray that listens on the loopback interface
  only (:func:`start_local_ray`; shut down by :meth:`RayActors.stop` on every path); ``auto``,
  ``host:port`` or ``ray://host:port`` join a running cluster (a warning without token
  authentication: the learner unpickles what the cluster's actors send); a process already
  connected to Ray (``ray.init`` called before) keeps its connection. Ray replaces the SIGTERM
  handler when it connects: border's stop-signal handlers are put back right after.

``ray`` is imported only here, inside functions: nothing else in border-py needs it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from border_py.actors.backend import (
    ActorFailure,
    ActorRecord,
    ActorSettings,
    Deliver,
    Launch,
    accounting_of,
)
from border_py.actors.process import ActorSpec, build_sampler
from border_py.actors.sampler import Sampler, SampleStats
from border_py.config import positive, require
from border_py.errors import ConfigError, first_line
from border_py.processes.children import one_thread_each
from border_py.processes.supervision import RestartPolicy
from border_py.resources import actors_per_core, enforced, usable_cores
from border_py.transport.batch import ReceivedBatch

log = logging.getLogger(__name__)

STRATEGIES = ("SPREAD", "PACK", "STRICT_SPREAD", "STRICT_PACK")
PROBE_SECONDS = 3.0  # how long the check of a cluster address waits for a TCP connection
PLACEMENT_SECONDS = 120.0  # how long the start waits for the placement group
GET_SECONDS = 30.0  # the longest a fetch of a finished call's result may take
FINISH_SECONDS = 5.0  # how long the stop waits for the actors' last counts
START_SECONDS = (
    300.0  # how long an actor may take to start (worker process, runtime_env, placement)
)
LOOPBACK = ("127.0.0.1", "::1")
TOKEN_AUTH = (2, 52)  # the first Ray with token authentication


@dataclass(frozen=True)
class PolicyWeights:
    """One publication of the learner's acting weights, as numpy arrays (zero-copy in Ray's
    object store)."""

    opt_steps: int
    arrays: dict[str, np.ndarray]


class SamplerActor:
    """One incarnation of an actor slot inside a Ray worker process (wrapped by ``ray.remote``).

    Each :meth:`sample` call loads the weights it carries (if any), samples ``n_buffer``
    transitions with the same sampler as an actor process and returns them with what the actor
    knew, as a :class:`~border_py.transport.batch.ReceivedBatch`.

    Args:
        spec: the slot, its incarnation, envs, batch size and exploration.
        config: the resolved run config (plain data).
    """

    def __init__(self, spec: ActorSpec, config: dict[str, Any]) -> None:
        one_thread_each()
        self.spec, self.config = spec, config
        self.sampler: Sampler | None = None
        self.policy_opt_steps = 0
        self.loaded_at = 0.0
        self.sent = 0
        self.idle_since: float | None = None

    def node(self) -> tuple[str, str]:
        """(node id, node IP address) of the Ray node this actor runs on."""
        import ray

        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()

    def sample(self, weights: PolicyWeights | None) -> ReceivedBatch:
        """Load ``weights`` (None: keep the current ones), sample one batch and return it.

        The envs and the agent copy are built by the first call (a bad env fails that call).
        ``waited`` is the time since the previous call ended: the actor idled, waiting for the
        learner to ask for more.
        """
        began = time.monotonic()
        waited = 0.0 if self.idle_since is None else began - self.idle_since
        if self.sampler is None:
            self.sampler = build_sampler(self.spec, self.config)
        agent = self.sampler.agent
        if weights is not None:  # copies out of the read-only object-store views
            agent.load_policy_state({k: torch.tensor(v) for k, v in weights.arrays.items()})
            self.policy_opt_steps, self.loaded_at = weights.opt_steps, time.time()
        stats = SampleStats()
        batch = self.sampler.sample(self.spec.n_buffer, stats)
        self.sent += len(batch)
        self.idle_since = time.monotonic()
        return ReceivedBatch(
            actor=self.spec.index,
            transitions=batch,
            env_steps=stats.env_steps,
            episode_returns=stats.episode_returns,
            episode_lengths=stats.episode_lengths,
            policy_opt_steps=self.policy_opt_steps,
            loaded_at=self.loaded_at,
            exploration={k: float(v) for k, v in agent.exploration_stats().items()},
            waited=waited,
        )

    def finish(self) -> int:
        """Close the envs; return the transitions this incarnation sent."""
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        return self.sent


@dataclass
class _Call:
    """A call the learner made to an actor and has not taken the result of yet."""

    ref: Any  # ray.ObjectRef
    sample: bool  # a sample call (else the node query)
    submitted: float  # time.monotonic()
    finished: float | None = None  # when the learner saw it finish


@dataclass
class _Incarnation:
    """The learner's handle on one running incarnation of an actor slot."""

    handle: Any  # ray.actor.ActorHandle
    calls: deque[_Call] = field(default_factory=deque)
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


@dataclass(eq=False)
class RayActors(ActorSettings):
    """Actors as Ray actors on a Ray cluster, or a local Ray (``actor_manager=ray``).

    Args:
        address: ``null``: start a local Ray with this machine's CPUs (and stop it at the end);
            ``auto``, ``host:port`` or ``ray://host:port``: join that running cluster (``ray
            start``). A process already connected to Ray keeps its connection.
        num_cpus_per_actor: CPUs each actor reserves (its placement-group bundle).
        placement_strategy: ``SPREAD`` (bundles over distinct nodes where possible), ``PACK``,
            ``STRICT_SPREAD`` or ``STRICT_PACK`` (Ray's placement-group strategies).
        max_calls_in_flight: ``sample`` calls queued or running at each actor (2: the next call
            is already there when one ends, so an actor never waits for the round trip).
        runtime_env: the Ray ``runtime_env`` of the actors (e.g. ``working_dir``, ``pip``) for
            nodes that lack border-py or the run's code; null: the nodes' own environment.
        object_store_memory: bytes of object store of a local Ray (null: Ray's default);
            only with ``address=null``.
        Others: see :class:`~border_py.actors.backend.ActorSettings` (``queue_size``: finished
            batches per actor that may wait for the learner; ``heartbeat_timeout``: the longest
            one call may run).
    """

    address: str | None = None
    num_cpus_per_actor: float = 1.0
    placement_strategy: str = "SPREAD"
    max_calls_in_flight: int = 2
    runtime_env: dict[str, Any] | None = None
    object_store_memory: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        positive("num_cpus_per_actor", self.num_cpus_per_actor)
        require(
            "placement_strategy",
            self.placement_strategy in STRATEGIES,
            f"one of {', '.join(STRATEGIES)}",
            self.placement_strategy,
        )
        positive("max_calls_in_flight", self.max_calls_in_flight, int)
        require(
            "runtime_env",
            self.runtime_env is None or isinstance(self.runtime_env, dict),
            "null or a mapping (Ray's runtime_env)",
            self.runtime_env,
        )
        if self.object_store_memory is not None:
            positive("object_store_memory", self.object_store_memory, int)
            require(
                "object_store_memory",
                self.address is None,
                "null when joining a cluster (address is set): the cluster's nodes size their own",
                self.object_store_memory,
            )
        check_address(self.address)
        self.num_cpus_per_actor = float(self.num_cpus_per_actor)
        self.records: list[ActorRecord] = []
        self.nodes: list[str | None] = []  # per slot: the node id of its current incarnation
        self._running: list[_Incarnation | None] = []
        self._policies: list[RestartPolicy] = []
        self._owner: str | None = None  # "local" (we started Ray), "cluster" (we joined), "caller"
        self._group: Any = None  # the placement group
        self._remote: Any = None  # ray.remote(SamplerActor)
        self._weights: tuple[int, dict[str, torch.Tensor]] | None = None  # (opt steps, policy)
        self._weights_ref: Any = None  # the object-store copy of the latest publication
        self._version = 0
        self._stopped = False

    def check_resources(self, config: dict[str, Any], spaces: tuple[Any, Any], n_step: int) -> None:
        """Also bound the actors of a local Ray by this machine's cores (a cluster's CPUs are
        checked once connected, before any actor starts)."""
        super().check_resources(config, spaces, n_step)
        if self.address is None:
            actors_per_core(self.n_actors, usable_cores(), "usable CPU cores", enforced(config))

    # -- start and weights -------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        """Connect to Ray, place one bundle per actor, then start every actor."""
        import ray

        self._config = launch.config
        saved = (launch.resume or {}).get("actors", [])
        self.records = [ActorRecord() for _ in range(self.n_actors)]
        for i, state in enumerate(saved[: self.n_actors]):
            self.records[i] = ActorRecord.resumed(state)
        self._policies = [
            RestartPolicy(f"actor {i}", self.max_restarts) for i in range(self.n_actors)
        ]
        self._running = [None] * self.n_actors
        self.nodes = [None] * self.n_actors
        self.publish(launch.policy, launch.opt_steps)
        self._connect()
        self._group = self._place()
        self._remote = ray.remote(SamplerActor)
        for index in range(self.n_actors):
            self._spawn(index)
        self._top_up()
        log.info(
            "started %d Ray actors x %d envs (%g CPU each, %s)",
            self.n_actors,
            self.n_envs_per_actor,
            self.num_cpus_per_actor,
            self.placement_strategy,
        )

    def _connect(self) -> None:
        """Join Ray as ``address`` says (or keep this process's connection)."""
        import ray

        if ray.is_initialized():
            self._owner = "caller"
            log.info("Ray: using this process's connection (ray.init was called before)")
            return
        with _signal_handlers_kept():
            try:
                if self.address is None:
                    cpus = usable_cores()
                    needed = math.ceil(self.n_actors * self.num_cpus_per_actor)
                    if needed > cpus:
                        log.warning(
                            "%d actors x %g CPU on %d CPU cores: the local Ray advertises %d"
                            " CPUs, so actors, learner and evaluator share the cores",
                            self.n_actors,
                            self.num_cpus_per_actor,
                            cpus,
                            needed,
                        )
                    start_local_ray(max(cpus, needed), self.object_store_memory)
                    self._owner = "local"
                else:
                    unauthenticated = _without_token_auth()
                    if unauthenticated:
                        log.warning(
                            "actor_manager.address=%r: joining a Ray cluster without token"
                            " authentication (%s): whoever reaches its ports can run code on it,"
                            " and in this learner, which unpickles what its actors send; use it on"
                            ' a trusted network only (README, "Beyond one machine: Ray")',
                            self.address,
                            unauthenticated,
                        )
                    ray.init(address=self.address)
                    self._owner = "cluster"
            except ConnectionError as exc:
                token = ""
                if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
                    token = " (one with token authentication needs RAY_AUTH_MODE=token here)"
                raise ConfigError(
                    f"actor_manager.address={self.address!r}: no Ray cluster to join"
                    f" ({first_line(exc)}){token}; start one with `ray start --head`, or set"
                    " actor_manager.address=null for a local Ray"
                ) from None

    def _place(self) -> Any:
        """A placement group of one bundle per actor, placed (or a one-line error)."""
        import ray
        from ray.exceptions import GetTimeoutError
        from ray.util.placement_group import placement_group, remove_placement_group

        cpu = self.num_cpus_per_actor
        needed = self.n_actors * cpu
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        node_cpus = sorted((float(n["Resources"].get("CPU", 0)) for n in nodes), reverse=True)
        where = f"actor_manager.n_actors={self.n_actors} x num_cpus_per_actor={cpu:g}"
        if needed > sum(node_cpus):
            raise ConfigError(f"{where} = {needed:g} CPUs: the Ray cluster has {sum(node_cpus):g}")
        actors_per_core(
            self.n_actors, sum(node_cpus), "CPUs of the Ray cluster", enforced(self._config)
        )
        if self.placement_strategy == "STRICT_SPREAD":
            fitting = sum(1 for c in node_cpus if c >= cpu)
            require(
                "actor_manager.placement_strategy",
                fitting >= self.n_actors,
                f"SPREAD or PACK: STRICT_SPREAD needs one node per actor ({self.n_actors}), the"
                f" cluster has {fitting} with {cpu:g} CPU",
                self.placement_strategy,
            )
        if self.placement_strategy == "STRICT_PACK":
            require(
                "actor_manager.placement_strategy",
                bool(node_cpus) and node_cpus[0] >= needed,
                f"SPREAD or PACK: STRICT_PACK needs one node with {needed:g} CPUs, the largest"
                f" has {node_cpus[0] if node_cpus else 0:g}",
                self.placement_strategy,
            )
        group = placement_group([{"CPU": cpu}] * self.n_actors, strategy=self.placement_strategy)
        try:
            ray.get(group.ready(), timeout=PLACEMENT_SECONDS)
        except GetTimeoutError:
            remove_placement_group(group)
            raise ActorFailure(
                f"Ray could not place {where} ({self.placement_strategy}) within"
                f" {PLACEMENT_SECONDS:g} s: the cluster's CPUs are busy (ray status shows them)"
            ) from None
        return group

    def _spawn(self, index: int) -> None:
        """Start the slot's current incarnation in its bundle and ask where it runs."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        record = self.records[index]
        record.begin_incarnation()
        spec = ActorSpec(
            index=index,
            incarnation=record.incarnation,
            n_envs=self.n_envs_per_actor,
            n_buffer=self.n_buffer,
            epsilons=self.epsilons()[index],
            exploration_steps=record.env_steps,
        )
        handle = self._remote.options(
            num_cpus=self.num_cpus_per_actor,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=self._group, placement_group_bundle_index=index
            ),
            runtime_env=self.runtime_env,
            name=None,
            max_restarts=0,  # a new incarnation (fresh seeds) replaces a dead one, not Ray
            max_task_retries=0,
        ).remote(spec, self._config)
        run = _Incarnation(handle)
        run.calls.append(_Call(handle.node.remote(), sample=False, submitted=time.monotonic()))
        self._running[index] = run
        self.nodes[index] = None

    def publish(self, policy: dict[str, torch.Tensor], opt_steps: int) -> None:
        """Keep the weights; they go into the object store when an actor next needs them."""
        self._version += 1
        self._weights = (opt_steps, policy)
        self._weights_ref = None

    def _current_weights(self) -> Any:
        """The object-store reference of the latest publication (put there once)."""
        import ray

        if self._weights_ref is None:
            assert self._weights is not None
            opt_steps, policy = self._weights
            arrays = {k: v.detach().cpu().numpy() for k, v in policy.items()}
            self._weights_ref = ray.put(PolicyWeights(opt_steps, arrays))
        return self._weights_ref

    def _top_up(self) -> None:
        """Give every actor new calls up to ``max_calls_in_flight``, unless ``queue_size``
        batches of it already wait for the learner."""
        if self._stopped:
            return
        for run in self._running:
            if run is None or run.failure is not None:
                continue
            while run.running() < self.max_calls_in_flight and run.waiting() < self.queue_size:
                weights = None
                if run.version != self._version:
                    weights, run.version = self._current_weights(), self._version
                ref = run.handle.sample.remote(weights)
                run.calls.append(_Call(ref, sample=True, submitted=time.monotonic()))

    # -- data in -----------------------------------------------------------------------------

    def _outstanding(self) -> dict[Any, int]:
        return {
            call.ref: i
            for i, run in enumerate(self._running)
            if run is not None and run.failure is None
            for call in run.calls
        }

    def _see_finished(self, refs: Collection[Any], now: float) -> None:
        """Note which calls finished (their results may not be here yet)."""
        for run in self._running:
            if run is None:
                continue
            for call in run.calls:
                if call.finished is None and call.ref in refs:
                    call.finished = now
                    run.last_finished = now

    def poll(self, timeout: float, deliver: Deliver) -> int:
        """Hand finished batches to ``deliver`` (waiting up to ``timeout`` for the first), then
        give the actors new calls."""
        import ray

        outstanding = self._outstanding()
        if not outstanding:
            if timeout > 0:
                time.sleep(min(timeout, 0.05))
            return 0
        refs = list(outstanding)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:  # everything else that is here too
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        here = set(ready)
        self._see_finished(here, time.monotonic())
        delivered = 0
        for index in sorted({outstanding[ref] for ref in here}):
            delivered += self._take(index, here, deliver)
        self._top_up()
        return delivered

    def _take(self, index: int, here: Collection[Any], deliver: Deliver | None) -> int:
        """Take the results of actor ``index``'s calls that are ``here``, in the order it ran
        them; stop at a failure."""
        import ray
        from ray.exceptions import RayActorError, RayError, RayTaskError

        run = self._running[index]
        assert run is not None
        record = self.records[index]
        delivered = 0
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
                record.incarnation_error = run.failure[1]
                break
            if not call.sample:
                node_id, ip = result
                self.nodes[index] = node_id
                log.info(
                    "actor %d (incarnation %d) runs on node %s (%s)",
                    index,
                    record.incarnation,
                    node_id[:12],
                    ip,
                )
                continue
            record.count(result)
            if deliver is not None:
                deliver(result)
            delivered += 1
        return delivered

    # -- health ------------------------------------------------------------------------------

    def check(self) -> None:
        """Restart actors that failed, died or ran one call too long; raise
        :class:`ActorFailure` when a restart cannot help. Then top up their calls."""
        import ray

        if self._stopped or not self._running:
            return
        refs = list(self._outstanding())
        if refs:
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
            self._see_finished(set(done), time.monotonic())
        for index, run in enumerate(self._running):
            if run is None:
                continue
            if run.failure is not None:
                self._replace(index, *run.failure)
                continue
            silent, starting = run.busy(time.monotonic())
            if starting and silent > max(START_SECONDS, self.heartbeat_timeout):
                log.error("actor %d not started after %.0f s: killing it", index, silent)
                cause = f"not started after {silent:.0f} s"
            elif not starting and silent > self.heartbeat_timeout:
                log.error(
                    "actor %d silent for %.1f s (actor_manager.heartbeat_timeout=%g): killing it",
                    index,
                    silent,
                    self.heartbeat_timeout,
                )
                cause = f"silent for {silent:.1f} s"
            else:
                continue
            ray.kill(run.handle, no_restart=True)
            self._replace(index, cause, None)
        self._top_up()

    def _replace(self, index: int, cause: str, error: str | None) -> None:
        """Retire a failed incarnation and start the next one (or end the run in one line)."""
        import ray

        run = self._running[index]
        assert run is not None
        record = self.records[index]
        with contextlib.suppress(Exception):  # it may be dead already
            ray.kill(run.handle, no_restart=True)
        record.end_incarnation(None)
        self._running[index] = None
        self.nodes[index] = None
        record.restart_or_fail(index, self._policies[index], cause, error)
        self._spawn(index)

    # -- stop --------------------------------------------------------------------------------

    def stop(self, deliver: Deliver | None = None, drain_timeout: float = 10.0) -> None:
        """Staged, idempotent shutdown: no new calls; with ``deliver``, take the calls in flight
        (up to ``drain_timeout`` seconds) and the actors' last counts; then kill the actors,
        remove the placement group, and stop the local Ray this backend started (or leave the
        cluster it joined). Without ``deliver`` (an immediate stop) nothing is waited for."""
        if self._stopped:
            return
        self._stopped = True
        try:
            if self._remote is not None:
                if deliver is not None:
                    self._drain(deliver, drain_timeout)
                    self._finish()
                self._kill_all()
        finally:
            self._release()

    def _drain(self, deliver: Deliver, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._outstanding() and (left := deadline - time.monotonic()) > 0:
            self.poll(min(left, 0.5), deliver)

    def _finish(self) -> None:
        """Ask each actor that is idle and sound for its count of transitions sent."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        asked = {
            i: run.handle.finish.remote()
            for i, run in enumerate(self._running)
            if run is not None and run.failure is None and not run.calls
        }
        for index, ref in asked.items():
            try:
                sent = ray.get(ref, timeout=FINISH_SECONDS)
            except (GetTimeoutError, RayError):
                continue
            self.records[index].end_incarnation(int(sent))

    def _kill_all(self) -> None:
        import ray

        for index, run in enumerate(self._running):
            if run is None:
                continue
            with contextlib.suppress(Exception):
                ray.kill(run.handle, no_restart=True)
            record = self.records[index]
            if not record.said_bye:
                record.end_incarnation(None)
            self._running[index] = None

    def _release(self) -> None:
        """Remove the placement group; stop or leave Ray as it was found."""
        import ray
        from ray.util.placement_group import remove_placement_group

        if self._group is not None:
            with contextlib.suppress(Exception):
                remove_placement_group(self._group)
            self._group = None
        owner, self._owner = self._owner, None
        if owner == "local":
            ray.shutdown(wait_for_processes=True)
            log.info("stopped the local Ray")
        elif owner == "cluster":
            ray.shutdown()

    # -- reporting ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The slots' counters and exploration positions (as the local backend's)."""
        return {"actors": [record.state() for record in self.records]}

    def accounting(self) -> dict[str, int]:
        """Transitions sent, received and dropped this session; received over all sessions."""
        return accounting_of(self.records)

    def alive(self) -> int:
        """Actors running now (not failed)."""
        return sum(1 for run in self._running if run is not None and run.failure is None)

    def restarts(self) -> int:
        """Restarts so far, all actors together."""
        return sum(record.restarts for record in self.records)


def check_address(address: str | None) -> None:
    """Refuse a malformed ``address``; for ``host:port`` and ``ray://host:port``, one whose port
    takes no TCP connection (Ray's own connect would retry for minutes)."""
    if address is None or address == "auto":
        return
    text = address if isinstance(address, str) else ""
    target = text.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    require(
        "address",
        bool(host) and port.isdigit(),
        "null (a local Ray), auto, host:port or ray://host:port",
        address,
    )
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        raise ConfigError(
            f"address={address!r}: no Ray cluster answers there ({exc.strerror or exc});"
            " start one with `ray start --head`, or set actor_manager.address=null for a local"
            " Ray"
        ) from None


def _died(exc: Any) -> tuple[str, str | None]:
    """(cause, exception line) of a Ray actor that died."""
    if exc.actor_init_failed:  # it would fail the same way again
        return "could not start", first_line(exc)
    return ("its node was preempted" if exc.preempted else "its worker or node died"), None


def _plain(text: str) -> str:
    """``text`` without terminal colour codes (Ray colours the name of a failed task)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def start_local_ray(num_cpus: int, object_store_memory: int | None = None) -> None:
    """Start a Ray of this machine for this process, listening on the loopback interface only
    (no dashboard); a warning if Ray still chose another address.

    Args:
        num_cpus: CPUs the Ray node advertises.
        object_store_memory: bytes of its object store (None: Ray's default, a share of RAM).
    """
    import ray

    with loopback_ray(), own_sessions():
        ray.init(
            address="local",
            num_cpus=num_cpus,
            object_store_memory=object_store_memory,
            include_dashboard=False,
            _node_ip_address=LOOPBACK[0],
        )
    ip = ray.util.get_node_ip_address()
    if ip not in LOOPBACK:
        log.warning("the local Ray took the address %s: it may listen beyond this machine", ip)


@contextlib.contextmanager
def own_sessions() -> Iterator[None]:
    """Within the block, the processes Ray starts for a local Ray (its servers; the workers its
    raylet forks) start in a session of their own, as the forkserver ignores stop signals: a
    SIGTERM to border's process group (``timeout``, ``kill -- -<pgid>``, a scheduler) then reaches
    border alone, whose graceful stop still needs them, instead of ending Ray under it (Ray blocks
    only SIGINT). They still die with border (Ray's fate sharing: the parent-death signal).
    """
    from ray._private import services

    popen = services.ConsolePopen

    class SessionPopen(popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs, start_new_session=True)

    services.ConsolePopen = SessionPopen  # type: ignore[misc]
    try:
        yield
    finally:
        services.ConsolePopen = popen  # type: ignore[misc]


@contextlib.contextmanager
def loopback_ray() -> Iterator[None]:
    """Within the block, Ray keeps 127.0.0.1 as this machine's node address (a local Ray's node,
    or a loopback cluster address to join).

    Ray's servers listen on every interface unless the node's address is a loopback one, and on
    Linux Ray replaces a loopback address it is given with the machine's routable one. It keeps
    it only when it runs as on macOS and Windows, one machine per cluster (Ray's switch
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which Ray reads once, at import: set here for the
    block).
    """
    from ray._private import ray_constants

    kept = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        if kept is None:
            del ray_constants.ENABLE_RAY_CLUSTER
        else:
            ray_constants.ENABLE_RAY_CLUSTER = kept


def _without_token_auth() -> str | None:
    """Why joining a cluster from here is unauthenticated, or None when it uses Ray's tokens."""
    import ray

    version = tuple(int(part) for part in re.findall(r"\d+", ray.__version__)[:2])
    if version < TOKEN_AUTH:
        return f"Ray {ray.__version__} has none; it came with Ray 2.52"
    if os.environ.get("RAY_AUTH_MODE", "").lower() != "token":
        return "RAY_AUTH_MODE is not token here"
    return None


@contextlib.contextmanager
def _signal_handlers_kept() -> Iterator[None]:
    """Put the SIGINT/SIGTERM handlers back after the block (``ray.init`` replaces SIGTERM's),
    so border's first-signal-graceful, second-signal-immediate stop keeps working."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            if signal.getsignal(sig) is not handler and handler is not None:
                signal.signal(sig, handler)
