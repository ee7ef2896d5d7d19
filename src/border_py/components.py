"""Building a run's components from the resolved config (in the learner and in child processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gymnasium as gym

from border_py.agents.base import Agent
from border_py.config import ConfigError, build, require
from border_py.envs import GymEnvFactory
from border_py.replay import UniformReplayBuffer
from border_py.seeding import derive_seed

if TYPE_CHECKING:
    from border_py.actor_manager import ActorManager


@dataclass
class Components:
    """What a learner builds from the resolved config before training."""

    env_factory: GymEnvFactory
    agent: Agent
    buffer: UniformReplayBuffer
    actors: ActorManager


def build_env_factory(config: dict[str, Any]) -> GymEnvFactory:
    """The ``env`` group's factory."""
    return build("env", config["env"])


def build_agent(
    config: dict[str, Any],
    spaces: tuple[gym.Space, gym.Space],
    device: str,
    seed_name: str = "agent",
) -> Agent:
    """The ``agent`` group, for the given spaces and device, seeded from the root seed."""
    obs_space, act_space = spaces
    agent = build(
        "agent",
        config["agent"],
        observation_space=obs_space,
        action_space=act_space,
        device=device,
        seed=derive_seed(config["seed"], seed_name),
    )
    missing = [
        m for m in ("act", "update", "policy_state", "load_policy_state") if not hasattr(agent, m)
    ]
    if missing:
        raise ConfigError(
            f"agent._target_={config['agent']['_target_']}: lacks {', '.join(missing)}"
        )
    return agent


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
    return Components(env_factory, agent, buffer, actors)
