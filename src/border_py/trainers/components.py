"""Building the learner's components from the resolved config, cross-checked."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from border_py.actors.runtime import Launch
from border_py.actors.settings import ActorSettings
from border_py.agents.base import (
    Agent,
    FixedEpsilon,
    RecurrentActing,
    TDErrorScoring,
    reports_td_error,
)
from border_py.agents.factory import build_agent
from border_py.agents.footprint import Footprint, check_agent_memory
from border_py.agents.inference import native_bfloat16
from border_py.agents.precision import offered_dtypes
from border_py.config import build, coerce_counts, is_int, require, resolve_target
from border_py.envs.factory import GymEnvFactory, build_env_factory
from border_py.errors import ConfigError
from border_py.files import read_json
from border_py.layout import BEST, CHECKPOINTS, META
from border_py.replay.base import ReplayBuffer
from border_py.replay.sequence_replay import SequenceReplayBuffer
from border_py.resources import (
    MAX_ENVS_PER_ACTOR,
    MAX_EPISODE_STEPS,
    at_most,
    memory,
)
from border_py.runs.settings import RunSettings
from border_py.runs.timeline import is_complete, periodic_checkpoints
from border_py.seeding import derive_seed

__all__ = [
    "Components",
    "build_components",
    "build_replay",
    "check_buffer_fits",
    "checkpoint_nbytes",
    "reclaimed_nbytes",
]

log = logging.getLogger(__name__)


@dataclass
class Components:
    """What a learner builds from the resolved config before training."""

    env_factory: GymEnvFactory
    agent: Agent
    buffer: ReplayBuffer
    actors: ActorSettings  # the actors' settings (the async trainer builds their runtime)
    footprint: Footprint | None = None  # the agent's sizes, if its class estimates them

    def launch(
        self, config: dict[str, Any], run: RunSettings, opt_steps: int = 0, env_steps: int = 0
    ) -> Launch:
        """What the actors need to start: these components with the learner's current policy,
        ``config`` and the run's settings, at ``opt_steps``/``env_steps`` (0: a fresh run)."""
        return Launch(
            config=config,
            spaces=self.env_factory.spaces(),
            agent=self.agent,
            policy=self.agent.policy_state(),
            opt_steps=opt_steps,
            env_steps=env_steps,
            seed=run.seed,
            check_resources=run.check_resources,
        )


def check_buffer_fits(buffer: ReplayBuffer, agent: Agent, observation_space: gym.Space) -> None:
    """Fail with one line if the replay buffer cannot serve this agent on these observations."""
    buffer.check_observations(observation_space)
    name = type(agent).__name__
    if buffer.needs_td_errors and not reports_td_error(agent):
        raise ConfigError(
            f"replay_buffer=prioritized: the agent {name} does not report TD errors"
            " (reports_td_error); use replay_buffer=uniform"
        )
    if buffer.priority_from_actors and not isinstance(agent, TDErrorScoring):
        raise ConfigError(
            f"replay_buffer.priority_from_actors=true: the agent {name} has no td_error(batch)"
        )


def _stores_sequences(target: Any) -> bool:
    return isinstance(target, type) and issubclass(target, SequenceReplayBuffer)


def check_replay_unit(spec: dict[str, Any], agent: Agent) -> None:
    """Refuse in one line a replay buffer whose unit the agent does not learn from: sequence
    replay with an agent that learns from transitions, transition replay with a recurrent agent
    (:class:`~border_py.agents.base.RecurrentActing`)."""
    if "_target_" not in spec:
        return  # build says so
    sequences = _stores_sequences(resolve_target(spec["_target_"], "replay_buffer._target_"))
    name = type(agent).__name__
    if isinstance(agent, RecurrentActing) and not sequences:
        raise ConfigError(
            f"replay_buffer._target_={spec['_target_']}: the recurrent agent {name} learns from"
            " sequences: use replay_buffer=sequence or replay_buffer=sequence_prioritized"
        )
    if sequences and not isinstance(agent, RecurrentActing):
        raise ConfigError(
            f"replay_buffer._target_={spec['_target_']}: stores sequences for recurrent agents"
            f" (agent=r2d2); {name} learns from transitions: use replay_buffer=uniform or"
            " replay_buffer=prioritized"
        )


def replay_nbytes(
    spec: dict[str, Any], spaces: tuple[gym.Space, gym.Space], agent: Agent | None = None
) -> tuple[int, int] | None:
    """(capacity, bytes) of a full replay buffer of ``spec``, estimated by its class's
    ``estimate_nbytes`` (a sequence buffer's for ``agent``'s sequences); None without one, or
    for a value its constructor refuses."""
    if "_target_" not in spec:
        return None  # build says so
    target = resolve_target(spec["_target_"], "replay_buffer._target_")
    estimate = getattr(target, "estimate_nbytes", None)
    keys = coerce_counts(target, {k: spec.get(k) for k in ("capacity", "frame_stack")})
    capacity, frame_stack = keys["capacity"], keys["frame_stack"]
    counts = [v for v in (capacity, frame_stack) if v is not None]
    if estimate is None or not all(isinstance(v, int) and v > 0 for v in counts):
        return None  # a bad value is the constructor's to refuse
    if not _stores_sequences(target):
        need = estimate(capacity, *spaces, frame_stack)
    elif isinstance(agent, RecurrentActing):  # rows shaped by the agent's sequences
        steps = agent.burn_in + agent.length + agent.n_step
        state_shape = agent.initial_state(1).shape[1:]
        per_sequence = spec.get("steps_per_sequence")  # the step ring's (a bad one: refused)
        per_sequence = per_sequence if is_int(per_sequence) and per_sequence > 0 else None
        need = estimate(capacity, spaces[0], steps, agent.length, state_shape, per_sequence)
    else:
        return None  # check_replay_unit refuses it
    return None if need is None else (capacity, need)


def check_replay_memory(
    spec: dict[str, Any], spaces: tuple[gym.Space, gym.Space], enforce: bool, agent: Agent
) -> None:
    """Bound the memory of the replay buffer ``spec`` describes (a full one, see
    :func:`replay_nbytes`) before it is built: the prioritized buffer's trees are allocated at
    once, the uniform buffer's rows as they fill, long after the actors started."""
    found = replay_nbytes(spec, spaces, agent)
    if found is not None:
        memory(f"replay_buffer.capacity={found[0]}", "the replay buffer", found[1], enforce)


def checkpoint_nbytes(config: dict[str, Any], parts: Components, replay: bool) -> tuple[int, int]:
    """(weights, replay buffer) bytes of one checkpoint of the run: ``policy.pt`` and ``agent.pt``
    as the agent's footprint estimates them (0 for a class without one), and with ``replay`` a
    full buffer (0 for a buffer without ``estimate_nbytes``)."""
    weights = 0 if parts.footprint is None else parts.footprint.checkpoint
    spaces = parts.env_factory.spaces()
    found = replay_nbytes(config["replay_buffer"], spaces, parts.agent) if replay else None
    return weights, 0 if found is None else found[1]


def tree_nbytes(path: Path) -> int:
    """Bytes of the regular files under ``path`` (links neither followed nor counted)."""
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            found = os.lstat(os.path.join(top, name))
            total += found.st_size if stat.S_ISREG(found.st_mode) else 0
    return total


def saved_at(checkpoint: Path) -> int | None:
    """The opt steps ``checkpoint``'s ``meta.json`` says it was saved at (None: it does not)."""
    try:
        steps = read_json(checkpoint / META).get("opt_steps")
    except (OSError, ValueError, AttributeError):
        return None
    return steps if is_int(steps) else None


def reclaimed_nbytes(run: RunSettings, kept: int, each: int, best: int) -> int:
    """Bytes of a resumed run's own checkpoints that its saving frees as it goes (0 for a fresh
    run; ``run``: the run's settings, its ``resume`` and ``run_dir``): the newest ``kept`` periodic ones of ``checkpoints/`` up to the checkpoint it resumes
    (newer ones are set aside, not freed), each counted up to ``each`` bytes (a new checkpoint's
    size), and ``best`` when it was not saved later, up to ``best`` bytes.

    A new checkpoint is written before the oldest is pruned, so while the run saves, each old
    checkpoint still on disk holds the place of a new one; counting each up to a new one's size
    never credits more room than the run will find (a larger old one frees its excess only once
    pruned, a smaller one is counted as it is).
    """
    step = saved_at(Path(run.resume)) if run.resume else None
    if step is None or run.run_dir is None:  # a resumed run's run_dir: its checkpoint's
        return 0
    root = Path(run.run_dir) / CHECKPOINTS
    older = [path for path in periodic_checkpoints(root) if int(path.name) <= step]
    newest = older[max(0, len(older) - kept) :] if kept > 0 else []
    freed = sum(min(tree_nbytes(path), each) for path in newest)
    later = saved_at(root / BEST)
    if is_complete(root / BEST) and later is not None and later <= step:
        freed += min(tree_nbytes(root / BEST), best)
    return freed


def check_policy_dtype(agent: Agent, dtype: str) -> None:
    """Refuse an acting precision the agent cannot act in; warn of bfloat16 on a CPU without AMX
    (where local actors would be no faster, or slower, than in float32). ``auto`` fits every
    agent (the actors' runtime resolves it: :mod:`border_py.agents.precision`)."""
    if dtype == "auto":
        return
    dtypes = offered_dtypes(agent)
    require(
        "actor_manager.policy_dtype",
        dtype in dtypes,
        f"one of {', '.join(dtypes)} for {type(agent).__name__} with this network",
        dtype,
    )
    if dtype == "bfloat16" and not native_bfloat16():
        log.warning(
            "actor_manager.policy_dtype=bfloat16: this CPU has no AMX bfloat16 units: local"
            " actors act no faster than in float32, or 3-5x slower without AVX512-BF16 either"
        )


def build_replay(
    spec: dict[str, Any], run: RunSettings, agent: Agent, spaces: tuple[gym.Space, gym.Space]
) -> ReplayBuffer:
    """The replay buffer of ``spec`` (its seed derived from the run's when unset), checked
    against the agent's unit of data (transitions or sequences) and bounded in memory."""
    rb = dict(spec)
    if rb.get("seed") is None:
        rb["seed"] = derive_seed(run.seed, "replay_buffer")
    check_replay_unit(rb, agent)
    check_replay_memory(rb, spaces, run.check_resources, agent)
    buffer = build("replay_buffer", rb)
    if not isinstance(buffer, ReplayBuffer):
        raise ConfigError(
            f"replay_buffer._target_={rb['_target_']}: not a replay buffer (see"
            " border_py.replay.base.ReplayBuffer)"
        )
    return buffer


def build_components(config: dict[str, Any], run: RunSettings, warmup_period: int) -> Components:
    """Build and cross-check env factory, learner agent, replay buffer and actor settings, and
    bound the agent's and the replay buffer's memory, the envs per actor and the episodes' length
    (see :mod:`border_py.resources`); ``run``: the run's settings of ``config`` (its seed, device
    and ``check_resources``)."""
    enforce = run.check_resources
    env_factory = build_env_factory(config)
    at_most(
        "env.max_episode_steps",
        getattr(env_factory, "max_episode_steps", None) or 0,
        MAX_EPISODE_STEPS,
        "steps per episode (an episode that never ends plays them all)",
        enforce,
    )
    spaces = env_factory.spaces()
    footprint = check_agent_memory(config["agent"], spaces, enforce)
    agent = build_agent(config, spaces, run.device, derive_seed(run.seed, "agent"))
    actors = build("actor_manager", config["actor_manager"])
    if not isinstance(actors, ActorSettings):
        raise ConfigError(
            f"actor_manager._target_={config['actor_manager']['_target_']}: not the actors'"
            " settings (see border_py.actors.settings.ActorSettings)"
        )
    at_most(
        "actor_manager.n_envs_per_actor",
        actors.n_envs_per_actor,
        MAX_ENVS_PER_ACTOR,
        "envs per actor (an actor makes and steps them one after another)",
        enforce,
    )
    if isinstance(env_factory, GymEnvFactory) and env_factory.backend == "vector":
        env_factory.vector_env(actors.n_envs_per_actor).close()  # its mistakes: one line, now
    buffer = build_replay(config["replay_buffer"], run, agent, spaces)
    capacity = buffer.capacity
    require(
        "agent.batch_size",
        agent.batch_size <= capacity,
        f"<= replay_buffer.capacity={capacity}",
        agent.batch_size,
    )
    require(
        "trainer.warmup_period",
        warmup_period <= capacity,
        f"<= replay_buffer.capacity={capacity}",
        warmup_period,
    )
    check_buffer_fits(buffer, agent, spaces[0])
    check_policy_dtype(agent, actors.policy_dtype)
    if actors.exploration == "apex" and not isinstance(agent, FixedEpsilon):
        raise ConfigError(
            "actor_manager.exploration='apex': the agent has no set_epsilon (use 'schedule')"
        )
    return Components(env_factory, agent, buffer, actors, footprint)
