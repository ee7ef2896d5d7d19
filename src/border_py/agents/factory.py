"""Building the ``agent`` group from the resolved config (in the learner and in child processes)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from border_py.agents.base import Agent, missing_members
from border_py.agents.spaces import check_spaces
from border_py.config import build, resolve_target
from border_py.errors import ConfigError

__all__ = ["build_agent"]


def build_agent(
    config: dict[str, Any],
    spaces: tuple[gym.Space, gym.Space],
    device: str,
    seed: int,
) -> Agent:
    """The ``agent`` group, for the given spaces, device and seed (the caller's, derived from the
    run's root seed: :func:`~border_py.seeding.derive_seed`).

    The env's spaces are checked against the class's declared ones (``accepts``) before the
    agent is built; the built agent must implement :class:`~border_py.agents.base.Agent`.

    Raises:
        ConfigError: one line: spaces the agent does not take (with the wrapper that would fix
            them), a bad key or value, or an agent lacking part of the protocol.
    """
    obs_space, act_space = spaces
    spec = config["agent"]
    if "_target_" in spec:  # without one, build() below fails in one line
        agent_class = resolve_target(spec["_target_"], "agent._target_")
        try:
            check_spaces(agent_class, obs_space, act_space)
        except ConfigError as exc:
            raise ConfigError(f"agent.{exc}") from None
    agent = build(
        "agent",
        spec,
        observation_space=obs_space,
        action_space=act_space,
        device=device,
        seed=seed,
    )
    if not isinstance(agent, Agent):
        raise ConfigError(
            f"agent._target_={spec['_target_']}: lacks {', '.join(missing_members(agent))}"
            " (see border_py.agents.base.Agent)"
        )
    return agent
