"""The actor process: a CPU copy of the policy stepping its envs and sending transition batches
(a recurrent agent's: sequences).

Each actor builds everything from plain config data, waits for the learner's first weights, then
loops: pick up new weights if their version changed, sample ``n_buffer`` transitions (with their
initial priorities, scored by this copy of the policy, under ``replay_buffer.priority_from_actors``;
frame by frame under ``replay_buffer.frame_stack``; a recurrent agent's ``n_buffer`` sequences,
each env's recurrent state carried from step to step and zeroed at each episode start, as the
serial trainer's actor does: :mod:`border_py.actors.recurrent`), wait for a free slot of its
channel (back-pressure), write the batch there and announce it. It beats its heartbeat after
every env step and every wait, reports a crash with its traceback, and ends with an
:class:`ActorDone` that carries its transition counts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from border_py.actors.clock import RunClock, SharedClock
from border_py.actors.sampler import Sampler, SampleStats, sampler_options
from border_py.agents.base import ActingPrecision, Agent, FixedEpsilon
from border_py.agents.contract import failure_report
from border_py.agents.factory import build_agent
from border_py.agents.precision import offered_dtypes, resolve_here
from border_py.envs.factory import build_env_factory
from border_py.processes.children import init_child
from border_py.processes.supervision import Heartbeats
from border_py.seeding import derive_seed
from border_py.transport.channel import BatchSender, LearnerGone, SlotRing, send
from border_py.transport.messages import ActorDone, BatchReady, WorkerFailed
from border_py.transport.weights import SharedWeights

__all__ = ["ActorLinks", "ActorSpec", "actor_main", "build_sampler"]

log = logging.getLogger(__name__)

WEIGHTS_POLL_SECONDS = 0.02  # how often an actor looks for the first weights


@dataclass(frozen=True)
class ActorSpec:
    """What makes actor ``index`` different from the others.

    Attributes:
        index: the actor slot.
        incarnation: 0 for the first start, +1 per restart (and per resumed session).
        n_envs: envs stepped together.
        n_buffer: transitions per batch (a recurrent agent's: sequences).
        epsilons: a fixed exploration epsilon per env (Ape-X), None: the agent's own schedule
            (at the run's env steps: :mod:`border_py.actors.clock`).
        policy_dtype: the precision the actor acts in (:class:`~border_py.agents.base.
            ActingPrecision`): ``float32``, ``bfloat16``, or ``auto``, which the actor resolves
            on its own CPU (:func:`~border_py.agents.precision.resolve_here`).
        seed: the run's root seed (the actor's agent and envs derive theirs from it).
    """

    index: int
    incarnation: int
    n_envs: int
    n_buffer: int
    epsilons: list[float] | None
    policy_dtype: str = "float32"
    seed: int = field(kw_only=True)


@dataclass(frozen=True)
class ActorLinks:
    """The actor's ends of everything it shares with the learner."""

    ring: SlotRing
    notices: Connection
    credits: Connection
    weights: SharedWeights
    heartbeats: Heartbeats
    stopping: Any  # a shared byte, set when the learner's shutdown begins
    clock: SharedClock  # the run's env steps; this actor advances its own slot


def actor_main(spec: ActorSpec, config: dict[str, Any], links: ActorLinks) -> None:
    """Entry point of an actor process (the target of ``Process``)."""
    init_child(f"actor {spec.index}", links.stopping)
    heartbeats, slot = links.heartbeats, spec.index

    def beat() -> None:
        heartbeats.beat(slot)

    def running() -> bool:
        beat()
        return not links.stopping.value

    sender = BatchSender(links.ring, links.notices, links.credits)
    try:
        sampler = build_sampler(spec, config, links.clock)
        while links.weights.version == 0:  # act with the learner's weights only
            if not running():
                return
            time.sleep(WEIGHTS_POLL_SECONDS)
        sent, dropped = _sample_until_stopped(spec, sampler, links, sender, beat, running)
        sampler.close()
        send(
            links.notices,
            ActorDone(actor=spec.index, incarnation=spec.incarnation, sent=sent, dropped=dropped),
        )
    except LearnerGone:
        return
    except Exception as exc:
        error = failure_report(exc)
        try:
            send(
                links.notices,
                WorkerFailed(actor=spec.index, incarnation=spec.incarnation, error=error),
            )
        except OSError:  # the learner is gone too: say it here (stderr) at least
            log.error("actor %d crashed:\n%s", spec.index, error)
        raise SystemExit(1) from None


@dataclass
class _Held:
    """The weights an actor acts with: their version, opt steps and when it loaded them."""

    version: int = 0
    opt_steps: int = 0
    loaded_at: float = 0.0

    def refresh(self, weights: SharedWeights, agent: Agent) -> None:
        """Load the latest weights into ``agent`` if their version changed (and a whole copy
        could be taken: else the next batch tries again)."""
        if weights.version != self.version:
            latest = weights.read()
            if latest is not None:
                self.version, self.opt_steps, state = latest
                agent.load_policy_state(state)
                self.loaded_at = time.time()


def _sample_until_stopped(
    spec: ActorSpec,
    sampler: Sampler,
    links: ActorLinks,
    sender: BatchSender,
    beat: Callable[[], None],
    running: Callable[[], bool],
) -> tuple[int, int]:
    """Sample batches into free slots of the ring and announce them until the stop; return the
    transitions (sequences) sent and those dropped (sampled, with no slot free before the
    stop)."""
    held = _Held()
    sent = dropped = 0
    while running():
        held.refresh(links.weights, sampler.agent)
        stats = SampleStats()
        batch = sampler.sample(spec.n_buffer, stats, beat)
        waiting_since = time.monotonic()
        if not sender.wait_for_slot(running):
            dropped += len(batch)
            break
        waited = time.monotonic() - waiting_since
        k = sender.free.popleft()
        rows, frames = links.ring.write(k, batch, stats.episode_returns, stats.episode_lengths)
        sender.send(
            BatchReady(
                actor=spec.index,
                incarnation=spec.incarnation,
                slot=k,
                rows=rows,
                frames=0 if frames is None else len(frames),
                frame_source=0 if frames is None else frames.source,
                frame_first=0 if frames is None else frames.first,
                frame_keep_from=0 if frames is None else frames.keep_from,
                priorities=batch.priority is not None,
                env_steps=stats.env_steps,
                episodes=len(stats.episode_returns),
                policy_version=held.version,
                policy_opt_steps=held.opt_steps,
                loaded_at=held.loaded_at,
                exploration={k: float(v) for k, v in sampler.agent.exploration_stats().items()},
                waited=waited,
            )
        )
        sent += rows
    return sent, dropped


def build_sampler(spec: ActorSpec, config: dict[str, Any], clock: RunClock) -> Sampler:
    """The actor's envs and its CPU copy of the agent, exploring as the spec says at the run's
    ``clock`` (the same for an actor process and a Ray actor, :mod:`border_py.actors.ray.worker`)."""
    env_factory = build_env_factory(config)
    agent = build_agent(
        config,
        env_factory.spaces(),
        "cpu",
        derive_seed(spec.seed, f"actor/{spec.index}/{spec.incarnation}"),
    )
    if spec.epsilons is not None:
        if not isinstance(agent, FixedEpsilon):
            raise TypeError(f"{type(agent).__name__} cannot fix its epsilon (set_epsilon)")
        agent.set_epsilon(np.asarray(spec.epsilons))
    dtype = resolve_here(spec.policy_dtype, offered_dtypes(agent))
    if dtype != "float32":
        if not isinstance(agent, ActingPrecision):  # refused earlier, in build_components
            raise TypeError(f"{type(agent).__name__} cannot act in {dtype}")
        agent.set_acting_dtype(dtype)
    return Sampler(
        env_factory,
        agent,
        spec.n_envs,
        derive_seed(spec.seed, "actor", spec.index, spec.incarnation, "env"),
        clock=clock,
        **sampler_options(config),
    )
