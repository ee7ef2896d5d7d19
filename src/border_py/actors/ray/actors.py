"""The ``actor_manager=ray`` option: actor slots as Ray actors, placed, started, watched, stopped.

:class:`RayActorSettings` are their settings, :class:`RayActors` their runtime: it runs each actor
slot as a Ray actor (:class:`~.worker.SamplerActor`) in a placement-group bundle of its own
(:mod:`.placement`). The learner, its replay buffer and the evaluator stay in this process. Its
parts: the Ray session (:mod:`.session`), the calls in flight and the actors' health
(:mod:`.calls`), and the weights, put in the object store once per publication
(:class:`~border_py.transport.weights.RayWeights`). An incarnation that failed is replaced by the
next one (fresh env seeds) as local actors are, under the same
:class:`~border_py.processes.supervision.RestartPolicy`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import torch

from border_py.actors.ray.calls import Calls
from border_py.actors.ray.placement import STRATEGIES, place, unplace
from border_py.actors.ray.session import check_address, connect, leave
from border_py.actors.ray.worker import SamplerActor
from border_py.actors.runtime import Deliver, Launch, accounting_of, slots_state
from border_py.actors.settings import ActorSettings
from border_py.agents.precision import for_ray_actors
from border_py.config import positive, require
from border_py.resources import actors_per_core, usable_cores
from border_py.transport.weights import RayWeights

__all__ = ["RayActorSettings", "RayActors"]

log = logging.getLogger(__name__)

FINISH_SECONDS = 5.0  # how long the stop waits for the actors' last counts


@dataclass(kw_only=True)
class RayActorSettings(ActorSettings):
    """Actors as Ray actors on a Ray cluster, or a local Ray (``actor_manager=ray``); their
    runtime is :class:`RayActors`. Their other keys: see
    :class:`~border_py.actors.settings.ActorSettings` (``queue_size``: finished batches per actor
    that may wait for the learner; ``heartbeat_timeout``: the longest one call may run).

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
    """

    address: str | None
    num_cpus_per_actor: float
    placement_strategy: str
    max_calls_in_flight: int
    runtime_env: dict[str, Any] | None
    object_store_memory: int | None

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

    def runtime(self) -> RayActors:
        """The Ray actors these settings configure (Ray is neither started nor joined yet)."""
        return RayActors(self)

    def check_resources(
        self, config: dict[str, Any], spaces: tuple[Any, Any], agent: Any, enforce: bool
    ) -> None:
        """Also bound a local Ray's actors by this machine's cores (a cluster's: once joined)."""
        super().check_resources(config, spaces, agent, enforce)
        if self.address is None:
            actors_per_core(self.n_actors, usable_cores(), "usable CPU cores", enforce)


class RayActors:
    """The Ray actors of a run, as :class:`RayActorSettings` configure them (an
    :class:`~border_py.actors.runtime.Actors`).

    Args:
        settings: the ``actor_manager`` group.
    """

    def __init__(self, settings: RayActorSettings) -> None:
        self.settings = settings
        self.records, self.kept, self._policies = settings.slots(None)  # kept: see slots
        self.nodes: list[str | None] = []  # per slot: the node id of its current incarnation
        self._calls = Calls(0, 0)
        self._owner: str | None = None  # who owns the Ray session (see session.connect)
        self._group: Any = None  # the placement group
        self._remote: Any = None  # ray.remote(SamplerActor)
        self.weights = RayWeights()
        self._stopped = False
        self._halted = False  # the budget is reached: no new calls
        self._env_steps = 0

    # -- start and weights -------------------------------------------------------------------

    def start(self, launch: Launch) -> None:
        """Connect to Ray, place one bundle per actor, then start every actor."""
        import ray

        settings, n = self.settings, self.settings.n_actors
        self._config, self._seed = launch.config, launch.seed
        self._dtype, acting = for_ray_actors(settings.policy_dtype, launch.agent)
        self._env_steps = launch.env_steps  # the run's, received: where new calls explore from
        self._calls = Calls(n, launch.env_steps_per_batch(settings.n_buffer))
        self.nodes = [None] * n
        self.publish(launch.policy, launch.opt_steps)
        cpu, strategy = settings.num_cpus_per_actor, settings.placement_strategy
        self._owner = connect(settings.address, n, cpu, settings.object_store_memory)
        self._group = place(n, cpu, strategy, launch.check_resources)
        self._remote = ray.remote(SamplerActor)
        for index in range(n):
            self._spawn(index)
        self._top_up()
        log.info(
            "started %d Ray actors x %d envs (%g CPU each, %s), acting in %s",
            n,
            settings.n_envs_per_actor,
            cpu,
            strategy,
            acting,
        )

    def _spawn(self, index: int) -> None:
        """Start the slot's current incarnation in its bundle and ask where it runs."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        record = self.records[index]
        record.begin_incarnation()
        spec = self.settings.spec(index, record, self._seed, self._dtype)
        handle = self._remote.options(
            num_cpus=self.settings.num_cpus_per_actor,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=self._group, placement_group_bundle_index=index
            ),
            runtime_env=self.settings.runtime_env,
            name=None,
            max_restarts=0,  # a new incarnation (fresh seeds) replaces a dead one, not Ray
            max_task_retries=0,
        ).remote(spec, self._config)
        self._calls.begin(index, handle)
        self.nodes[index] = None

    def publish(self, policy: dict[str, torch.Tensor], opt_steps: int) -> None:
        """Keep the weights; they go into the object store when an actor next needs them."""
        self.weights.publish(policy, opt_steps)

    def halt(self) -> None:
        """No new calls: the calls in flight still arrive, and no actor is replaced."""
        self._halted = True

    def _top_up(self) -> None:
        """Give the actors new calls (none once the budget is reached or the stop began)."""
        if not (self._stopped or self._halted):
            limits = (self.settings.max_calls_in_flight, self.settings.queue_size)
            self._calls.top_up(self.weights, limits, self._env_steps)

    # -- data in -----------------------------------------------------------------------------

    def poll(self, timeout: float, deliver: Deliver) -> int:
        """Hand finished batches to ``deliver`` (waiting up to ``timeout`` for the first), then
        give the actors new calls."""
        import ray

        outstanding = self._calls.outstanding()
        if not outstanding:
            if timeout > 0:
                time.sleep(min(timeout, 0.05))
            return 0
        refs = list(outstanding)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:  # everything else that is here too
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        here = set(ready)
        self._calls.see_finished(here, time.monotonic())
        delivered = 0
        for index in sorted({outstanding[ref] for ref in here}):
            delivered += self._take(index, here, deliver)
        self._top_up()
        return delivered

    def _take(self, index: int, here: Collection[Any], deliver: Deliver | None) -> int:
        """Count and deliver the results of actor ``index``'s calls that are ``here``."""
        record = self.records[index]
        delivered = 0
        for call, result in self._calls.results(index, here):
            if not call.sample:
                node_id, ip, record.policy_dtype = result  # auto: as the node's CPU decided
                self.nodes[index] = node_id
                where = f"node {node_id[:12]} ({ip}), acting in {record.policy_dtype}"
                log.info("actor %d (incarnation %d) runs on %s", index, record.incarnation, where)
                continue
            record.count(result)
            self._env_steps += result.env_steps
            if deliver is not None:
                deliver(result)
            delivered += 1
        run = self._calls.running[index]
        if run is not None and run.failure is not None:
            record.incarnation_error = run.failure[1]
        return delivered

    # -- health ------------------------------------------------------------------------------

    def check(self) -> None:
        """Restart actors that failed, died or ran one call too long; raise
        :class:`ActorFailure` when a restart cannot help. Then top up their calls."""
        if self._stopped or self._halted or not self._calls.running:
            return
        for index, cause, error in self._calls.unsound(self.settings.heartbeat_timeout):
            self._replace(index, cause, error)
        self._top_up()

    def _replace(self, index: int, cause: str, error: str | None) -> None:
        """Retire a failed incarnation and start the next one (or end the run in one line)."""
        import ray

        run = self._calls.running[index]
        assert run is not None
        record = self.records[index]
        with contextlib.suppress(Exception):  # it may be dead already
            ray.kill(run.handle, no_restart=True)
        record.end_incarnation(None)
        self._calls.running[index] = None
        self.nodes[index] = None
        record.restart_or_fail(index, self._policies[index], cause, error)
        self._spawn(index)

    # -- stop --------------------------------------------------------------------------------

    def stop(self, deliver: Deliver | None = None, drain_timeout: float = 10.0) -> None:
        """Staged, idempotent shutdown: no new calls; with ``deliver``, take the calls in flight
        (up to ``drain_timeout`` seconds) and the actors' last counts; then kill the actors,
        remove the placement group, and stop the local Ray these actors started (or leave the
        cluster they joined). Without ``deliver`` (an immediate stop) nothing is waited for."""
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
        while self._calls.outstanding() and (left := deadline - time.monotonic()) > 0:
            self.poll(min(left, 0.5), deliver)

    def _finish(self) -> None:
        """Ask each actor that is idle and sound for its count of transitions sent."""
        import ray
        from ray.exceptions import GetTimeoutError, RayError

        asked = {
            i: run.handle.finish.remote()
            for i, run in enumerate(self._calls.running)
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

        for index, run in enumerate(self._calls.running):
            if run is None:
                continue
            with contextlib.suppress(Exception):
                ray.kill(run.handle, no_restart=True)
            record = self.records[index]
            if not record.said_bye:
                record.end_incarnation(None)
            self._calls.running[index] = None

    def _release(self) -> None:
        """Remove the placement group; stop or leave Ray as it was found."""
        if self._group is not None:
            unplace(self._group)
            self._group = None
        owner, self._owner = self._owner, None
        leave(owner)

    # -- reporting ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The slots' counters (as local actors')."""
        return slots_state(self.records, self.kept)

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue the saved slots' counters (as local actors')."""
        self.records, self.kept, self._policies = self.settings.slots(saved)

    def accounting(self) -> dict[str, int]:
        """Transitions sent, received and dropped this session; received over all sessions."""
        return accounting_of(self.records, self.kept)

    def alive(self) -> int:
        """Actors running now (not failed)."""
        return self._calls.alive()

    def restarts(self) -> int:
        """Restarts so far, all actors together."""
        return sum(record.restarts for record in self.records)
