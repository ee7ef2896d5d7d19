"""How to build a run's evaluation env without border-py, as data: ``preprocessing.json``'s
``env_interface``, which the export's ``env.py`` (:mod:`border_py.deploy.plain_env`) builds.

It is read off the run's env factory (border's own: gymnasium ids, Atari, MinAtar, POPGym; a
user's factory is named, not described): the registration the env's package needs, the id and its
``gymnasium.make`` keyword arguments, then the steps of the factory's ``make()`` in order
(``make(training=False)``: the env ``border eval`` plays), each ``env`` (a wrapper that changes
the episodes) or ``observation`` (a function of each observation alone). The steps are those of
:mod:`border_py.envs.atari`, :mod:`border_py.envs.minatar`, :mod:`border_py.envs.popgym` and
``env.wrappers``; the export's parity tests play the same episodes through both.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from border_py.envs.atari import AtariEnvFactory, FireOnReset
from border_py.envs.factory import GymEnvFactory
from border_py.envs.minatar import MinAtarEnvFactory
from border_py.envs.popgym import OneHotObservation, PopGymEnvFactory

__all__ = ["env_interface", "json_space"]

BORDERS = (GymEnvFactory, AtariEnvFactory, MinAtarEnvFactory, PopGymEnvFactory)


def json_bounds(values: np.ndarray) -> Any:
    """A space's bounds as JSON numbers: one when all are equal, else the nested list
    (infinities as ``Infinity``, which Python's ``json`` and numpy read back)."""
    flat = np.unique(values)
    return (flat[0] if len(flat) == 1 else np.asarray(values)).tolist()


def json_space(space: gym.Space) -> dict[str, Any]:
    """A gymnasium space as JSON (a ``Box``'s bounds as numbers)."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).name,
            "low": json_bounds(space.low),
            "high": json_bounds(space.high),
        }
    return {"type": type(space).__name__, "repr": str(space)}


def _leaves(space: gym.Space) -> list[gym.Space]:
    """A space's parts in order, a Tuple's flattened."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for inner in space.spaces for leaf in _leaves(inner)]
    return [space]


def _one_hot_parts(space: gym.Space) -> list[dict[str, Any]]:
    """POPGym's raw space as the one-hot step's parts
    (:class:`~border_py.envs.popgym.OneHotObservation`, which checked them)."""
    parts: list[dict[str, Any]] = []
    for part in _leaves(space):
        if isinstance(part, gym.spaces.Box):
            parts.append({"type": "Box"})
        elif isinstance(part, gym.spaces.Discrete):
            parts.append({"type": "Discrete", "sizes": [int(part.n)], "start": int(part.start)})
        else:
            assert isinstance(part, gym.spaces.MultiDiscrete)
            parts.append(
                {
                    "type": "MultiDiscrete",
                    "sizes": np.asarray(part.nvec).tolist(),
                    "start": np.asarray(part.start).tolist(),
                }
            )
    return parts


def _step(kind: str, op: str, **args: Any) -> dict[str, Any]:
    return {"kind": kind, "op": op, "args": args} if args else {"kind": kind, "op": op}


def _atari(factory: AtariEnvFactory) -> tuple[list[dict[str, Any]], dict[str, Any], list[Any]]:
    """Atari's registration, ``gymnasium.make`` kwargs and steps (its evaluation env)."""
    steps = [
        _step(
            "env",
            "atari_preprocessing",
            noop_max=factory.noop_max,
            frame_skip=factory.frame_skip,
            screen_size=factory.screen_size,
            terminal_on_life_loss=False,
            grayscale_obs=True,
            scale_obs=False,
        )
    ]
    meanings = factory.action_meanings()
    if factory.fire_reset in ("auto", True) and "FIRE" in meanings:
        fire = meanings.index("FIRE")
        steps.append(_step("env", "fire_on_reset", fire=fire, max_resets=FireOnReset.MAX_RESETS))
    if factory.max_episode_steps is not None:
        steps.append(_step("env", "time_limit", max_episode_steps=factory.max_episode_steps))
    steps.append(_step("observation", "frame_stack", k=factory.frame_stack, merge=False))
    register = [{"module": "ale_py", "python": "import ale_py; gymnasium.register_envs(ale_py)"}]
    return register, dict(factory.make_kwargs), steps


def _minatar(factory: MinAtarEnvFactory, kwargs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """MinAtar's registration and steps."""
    raw = gym.make(factory.id, **kwargs)
    h, w, c = raw.observation_space.shape or ()
    raw.close()
    grid = {"low": 0, "high": 1, "shape": [c, h, w], "dtype": "uint8"}
    steps = [_step("observation", "channels_first", dtype="uint8") | {"space": grid}]
    if factory.flicker:
        steps.append(_step("env", "flicker", p=factory.flicker))
    if factory.frame_stack > 1:
        steps.append(_step("observation", "frame_stack", k=factory.frame_stack, merge=True))
    register = [
        {
            "module": "minatar.gym",
            "call": "register_envs",
            "python": "from minatar.gym import register_envs; register_envs()",
        }
    ]
    return register, steps


def env_interface(factory: GymEnvFactory, target: str) -> dict[str, Any]:
    """``preprocessing.json``'s ``env_interface`` for the run's env ``factory`` (its config's
    ``_target_``: ``target``)."""
    if type(factory) not in BORDERS:
        return {
            "unsupported": f"its env is built by {target}, a factory of the run's own code: build"
            " it with that code (the observations: see 'observation')"
        }
    register: list[dict[str, Any]] = []
    kwargs = dict(factory.kwargs)
    if factory.max_episode_steps is not None and not isinstance(factory, AtariEnvFactory):
        kwargs["max_episode_steps"] = factory.max_episode_steps
    steps: list[dict[str, Any]] = []
    if isinstance(factory, AtariEnvFactory):
        register, kwargs, steps = _atari(factory)
    elif isinstance(factory, MinAtarEnvFactory):
        register, steps = _minatar(factory, kwargs)
    elif isinstance(factory, PopGymEnvFactory):
        register = [{"module": "popgym", "python": "import popgym"}]
        raw = gym.make(factory.id, **kwargs)
        parts = _one_hot_parts(raw.observation_space)
        space = json_space(OneHotObservation(raw).observation_space)
        raw.close()
        steps = [_step("observation", "one_hot", parts=parts) | {"space": space}]
    for wrapper in factory.wrappers:
        if wrapper.applies(training=False):
            steps.append(_step("env", "wrapper", **wrapper.spec))
    return {"register": register, "id": factory.id, "kwargs": kwargs, "steps": steps}
