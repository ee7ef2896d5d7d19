"""Building the learner's components from the resolved config, cross-checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from border_py.actors.local import ActorManager
from border_py.agents.base import Agent, FixedEpsilon
from border_py.agents.factory import build_agent
from border_py.config import build, require
from border_py.envs.factory import GymEnvFactory, build_env_factory
from border_py.errors import ConfigError
from border_py.replay.uniform import UniformReplayBuffer
from border_py.seeding import derive_seed


@dataclass
class Components:
    """What a learner builds from the resolved config before training."""

    env_factory: GymEnvFactory
    agent: Agent
    buffer: UniformReplayBuffer
    actors: ActorManager


def build_components(config: dict[str, Any], warmup_period: int) -> Components:
    """Build and cross-check env factory, learner agent, replay buffer and actor settings."""
    env_factory = build_env_factory(config)
    spaces = env_factory.spaces()
    agent = build_agent(config, spaces, config["device"])
    rb = dict(config["replay_buffer"])
    if rb.get("seed") is None:
        rb["seed"] = derive_seed(config["seed"], "replay_buffer")
    buffer = build("replay_buffer", rb)
    actors = build("actor_manager", config["actor_manager"])
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
    buffer.check_run(agent, spaces[0])
    if actors.exploration == "apex" and not isinstance(agent, FixedEpsilon):
        raise ConfigError(
            "actor_manager.exploration='apex': the agent has no set_epsilon (use 'schedule')"
        )
    return Components(env_factory, agent, buffer, actors)
