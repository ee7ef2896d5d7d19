"""The actor process: a CPU copy of the policy stepping its envs and sending transition batches.

Each actor builds everything from plain config data, waits for the learner's first weights, then
loops: pick up new weights if the version changed, sample ``n_buffer`` transitions (with their
initial priorities, scored by this copy of the policy, under ``replay_buffer.priority_from_actors``;
frame by frame under ``replay_buffer.frame_stack``), put them on the bounded queue (blocking with a
timeout: back-pressure). It reports crashes with their traceback and ends with a ``bye`` that
carries its transition counts.
"""

from __future__ import annotations

import logging
import queue as queue_lib
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from border_py.actors.sampler import Sampler, SampleStats, sampler_options
from border_py.agents.factory import build_agent
from border_py.envs.factory import build_env_factory
from border_py.processes import init_child, parent_alive
from border_py.seeding import derive_seed
from border_py.transitions import Transitions
from border_py.transport.weights import SharedWeights

log = logging.getLogger(__name__)

PUT_TIMEOUT = 0.2  # seconds a blocked put waits before looking at the stop flag again


@dataclass(frozen=True)
class ActorSpec:
    """What makes actor ``index`` different from the others."""

    index: int
    incarnation: int  # 0 for the first start, +1 per restart
    n_envs: int
    n_buffer: int
    epsilon: float | None  # a fixed exploration epsilon (Ape-X), None: the agent's own schedule
    exploration_steps: int  # env steps this actor slot already explored (continues the schedule)


@dataclass
class ActorReport:
    """A message from an actor: a batch of transitions, an error, or the final ``bye``."""

    actor: int
    kind: str  # "batch" | "error" | "bye"
    transitions: Transitions | None = None
    env_steps: int = 0
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    policy_opt_steps: int = 0
    policy_loaded_at: float = 0.0  # time.time() when this actor loaded the weights it sampled with
    exploration: dict[str, float] = field(default_factory=dict)
    sent: int = 0  # bye: transitions sent in total by this incarnation
    dropped: int = 0  # bye: transitions sampled but not sent (stop arrived first)
    error: str = ""


def _put(channel: Any, report: ActorReport, stop: Any, parent_pid: int) -> bool:
    """Put ``report`` on the queue, waiting while it is full; False once stop is set or the parent is gone."""
    while not stop.is_set() and parent_alive(parent_pid):
        try:
            channel.put(report, timeout=PUT_TIMEOUT)
            return True
        except queue_lib.Full:
            continue
    return False


def actor_main(
    spec: ActorSpec, config: dict[str, Any], weights: SharedWeights, channel: Any, stop: Any
) -> None:
    """Entry point of an actor process (the target of ``Process``)."""
    parent_pid = init_child(f"actor {spec.index}", stop)
    sent = dropped = 0
    try:
        seed = config["seed"]
        env_factory = build_env_factory(config)
        agent = build_agent(
            config, env_factory.spaces(), "cpu", f"actor/{spec.index}/{spec.incarnation}"
        )
        if spec.epsilon is not None:
            agent.set_epsilon(spec.epsilon)
        if spec.exploration_steps and hasattr(agent, "set_exploration_step"):
            agent.set_exploration_step(spec.exploration_steps)
        sampler = Sampler(
            env_factory,
            agent,
            spec.n_envs,
            derive_seed(seed, "actor", spec.index, spec.incarnation, "env"),
            **sampler_options(config),
        )
        version = policy_opt_steps = 0
        loaded_at = 0.0
        while weights.version == 0 and not stop.wait(0.02):  # start from the learner's weights only
            if not parent_alive(parent_pid):
                return
        while not stop.is_set() and parent_alive(parent_pid):
            if weights.version != version:
                latest = weights.read()
                if latest is not None:
                    version, policy_opt_steps, state = latest
                    agent.load_policy_state(state)
                    loaded_at = time.time()
            stats = SampleStats()
            batch = sampler.sample(spec.n_buffer, stats)
            report = ActorReport(
                spec.index,
                "batch",
                batch,
                stats.env_steps,
                stats.episode_returns,
                stats.episode_lengths,
                policy_opt_steps,
                loaded_at,
                {k: float(v) for k, v in agent.exploration_stats().items()},
            )
            if _put(channel, report, stop, parent_pid):
                sent += len(batch)
            else:
                dropped += len(batch)
        sampler.close()
    except Exception:
        error = traceback.format_exc()
        try:
            channel.put(ActorReport(spec.index, "error", error=error), timeout=5)
        except queue_lib.Full:  # the learner is not reading: say it here (stderr) at least
            log.error("actor %d crashed:\n%s", spec.index, error)
        raise SystemExit(1) from None
    try:
        channel.put(ActorReport(spec.index, "bye", sent=sent, dropped=dropped), timeout=5)
    except queue_lib.Full:
        log.warning("queue full at exit: bye not delivered")
