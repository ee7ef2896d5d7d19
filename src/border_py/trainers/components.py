"""Building the learner's components from the resolved config, cross-checked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from border_py.actors.backend import ActorSettings
from border_py.agents.base import Agent, FixedEpsilon, TDErrorScoring, reports_td_error
from border_py.agents.factory import build_agent
from border_py.config import build, require
from border_py.envs.factory import GymEnvFactory, build_env_factory
from border_py.errors import ConfigError
from border_py.replay.base import ReplayBuffer
from border_py.seeding import derive_seed


@dataclass
class Components:
    """What a learner builds from the resolved config before training."""

    env_factory: GymEnvFactory
    agent: Agent
    buffer: ReplayBuffer
    actors: ActorSettings  # the async trainer's are an ActorBackend too


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


def build_components(config: dict[str, Any], warmup_period: int) -> Components:
    """Build and cross-check env factory, learner agent, replay buffer and actor settings."""
    env_factory = build_env_factory(config)
    spaces = env_factory.spaces()
    agent = build_agent(config, spaces, config["device"])
    rb = dict(config["replay_buffer"])
    if rb.get("seed") is None:
        rb["seed"] = derive_seed(config["seed"], "replay_buffer")
    buffer = build("replay_buffer", rb)
    if not isinstance(buffer, ReplayBuffer):
        raise ConfigError(
            f"replay_buffer._target_={rb['_target_']}: not a replay buffer (see"
            " border_py.replay.base.ReplayBuffer)"
        )
    actors = build("actor_manager", config["actor_manager"])
    if not isinstance(actors, ActorSettings):
        raise ConfigError(
            f"actor_manager._target_={config['actor_manager']['_target_']}: not an actor manager"
            " (see border_py.actors.backend)"
        )
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
    if actors.exploration == "apex" and not isinstance(agent, FixedEpsilon):
        raise ConfigError(
            "actor_manager.exploration='apex': the agent has no set_epsilon (use 'schedule')"
        )
    return Components(env_factory, agent, buffer, actors)
