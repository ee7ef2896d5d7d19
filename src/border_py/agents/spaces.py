"""Checking an env's spaces against the spaces an agent class declares, before anything starts.

An agent class declares what it takes (``accepts = Accepts(...)``, see
:class:`border_py.agents.base.Accepts`); :func:`check_spaces` turns any other space into one
:class:`~border_py.errors.ConfigError` line naming the gymnasium wrapper that would fix it and
how to add it (``env.wrappers=[...]``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from border_py.agents.base import Accepts, declared_spaces
from border_py.errors import ConfigError

__all__ = ["check_spaces"]

FLATTENABLE = (
    gym.spaces.Dict,
    gym.spaces.Tuple,
    gym.spaces.Discrete,
    gym.spaces.MultiDiscrete,
    gym.spaces.MultiBinary,
)  # gymnasium's FlattenObservation turns these into a Box (Discrete ones one-hot)


def wrapper_hint(target: str, **kwargs: object) -> str:
    """How to add a wrapper, in override syntax: ``env.wrappers=[{_target_: ..., key: value}]``."""
    keys = "".join(f", {key}: {value}" for key, value in kwargs.items())
    return f"env.wrappers=[{{_target_: {target}{keys}}}]"


def finite_box(space: gym.Space) -> bool:
    """Whether ``space`` is a Box with finite bounds."""
    return isinstance(space, gym.spaces.Box) and bool(
        np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))
    )


def _names(types: tuple[type[gym.Space], ...]) -> str:
    return " or ".join(t.__name__ for t in types)


def observation_problem(name: str, accepts: Accepts, space: gym.Space) -> str | None:
    """Why ``space`` is not an observation space the agent takes, with the fix; None if it is."""
    if isinstance(space, accepts.observation):
        return None
    needs = (
        f"_target_: {name} needs {_names(accepts.observation)} observations, the env has {space}"
    )
    if gym.spaces.Box in accepts.observation and isinstance(space, FLATTENABLE):
        return f"{needs}; flatten them into a Box: {wrapper_hint('gymnasium.wrappers.FlattenObservation')}"
    return f"{needs}; wrap the env in a gymnasium ObservationWrapper that gives {_names(accepts.observation)} observations"


def _bounded_box_hint(space: gym.Space) -> str:
    """How to give an env with unbounded Box actions a bounded action space."""
    shape = list(space.shape or ())
    return (
        "declare the range to act in: "
        + wrapper_hint(
            "gymnasium.wrappers.TransformAction",
            func="{_target_: numpy.asarray, _partial_: true}",
            action_space=f"{{_target_: gymnasium.spaces.Box, low: -1.0, high: 1.0, shape: {shape}}}",
        )
        + " (gymnasium's RescaleAction and ClipAction keep infinite bounds)"
    )


def action_problem(name: str, accepts: Accepts, space: gym.Space) -> str | None:
    """Why ``space`` is not an action space the agent takes, with the fix; None if it is."""
    unbounded = isinstance(space, gym.spaces.Box) and not finite_box(space)
    if isinstance(space, accepts.action) and not (accepts.bounded_actions and unbounded):
        return None
    if gym.spaces.Box in accepts.action:  # an agent for continuous actions
        bounds = " with finite bounds" if accepts.bounded_actions else ""
        needs = (
            f"_target_: {name} needs a continuous (Box) action space{bounds}, the env has {space}"
        )
        if unbounded:
            return f"{needs}; {_bounded_box_hint(space)}"
        if isinstance(space, gym.spaces.Discrete):
            return f"{needs} (for discrete actions use agent=dqn)"
        return f"{needs}; wrap the env in a gymnasium ActionWrapper that takes Box actions"
    needs = f"_target_: {name} needs a {_names(accepts.action)} action space, the env has {space}"
    if gym.spaces.Discrete in accepts.action and isinstance(space, gym.spaces.Box):
        discretize = wrapper_hint("gymnasium.wrappers.DiscretizeAction", bins=5)
        if not hasattr(gym.wrappers, "DiscretizeAction"):  # gymnasium 1.3 added it
            discretize += "; gymnasium >= 1.3"
        if unbounded:
            return f"{needs}; its bounds are infinite: {_bounded_box_hint(space)}, then discretize it ({discretize})"
        return f"{needs}; discretize it ({discretize}: 5 bins per dimension) or use agent=sac"
    return f"{needs}; wrap the env in a gymnasium ActionWrapper that takes {_names(accepts.action)} actions"


def check_spaces(agent_class: type, observation_space: gym.Space, action_space: gym.Space) -> None:
    """Raise one :class:`ConfigError` line (starting ``_target_: <class> needs``) if the class
    declares spaces (``accepts``) and the env's are not among them; nothing for an undeclared class."""
    accepts = declared_spaces(agent_class)
    if accepts is None:
        return
    name = agent_class.__name__
    problem = observation_problem(name, accepts, observation_space) or action_problem(
        name, accepts, action_space
    )
    if problem is not None:
        raise ConfigError(problem)
