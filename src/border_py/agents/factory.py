"""Building the ``agent`` group from the resolved config (in the learner and in child processes)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from border_py.agents.base import Agent
from border_py.config import build
from border_py.errors import ConfigError
from border_py.seeding import derive_seed


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
