"""MinAtar (Young & Tian 2019) through its gymnasium registration (``env=minatar``; the
``[minatar]`` extra): five Atari-like games on a 10x10 grid, small enough to learn from pixels on
a CPU.

MinAtar's observation is a bool grid, channels last (10, 10, C), one channel per kind of object
(Breakout: paddle, ball, trail, brick). Border's image torsos take uint8 channels first, as the
Atari frames are: :func:`channels_first` turns each grid into a uint8 (C, 10, 10) array of 0s
and 1s through gymnasium's ``TransformObservation``, and the space is ``Box(0, 1, (C, 10, 10),
uint8)``. Networks scale uint8 inputs by the space's upper bound (1 here, see
:func:`~border_py.agents.networks.input_scale`), and ``agent.network=auto`` picks the MinAtar
torso (:class:`~border_py.agents.networks.MinAtarCNN`) for frames too small for the Nature CNN.

The game's own settings are keys: ``sticky_action_prob`` (MinAtar's default 0.1: the previous
action is repeated with that probability) and ``difficulty_ramping``; ``flicker`` blanks the
whole screen with that probability at each step (:mod:`border_py.envs.flicker`: a memory task),
and ``frame_stack`` gives the last k screens as one observation of k times the channels (at an
episode's start the stack repeats its first screen, gymnasium's ``FrameStackObservation``). The sticky-action draws come
from the game's generator, which ``reset(seed=...)`` seeds: as with Atari's sticky actions, a
serial run's resumed episode that began by an automatic reset is rebuilt with the same actions
but possibly other states (see :mod:`border_py.envs.atari`).
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FrameStackObservation, TransformObservation

from border_py.config import flag, fraction, positive, require
from border_py.envs.deferred import defer_imports
from border_py.envs.factory import GymEnvFactory
from border_py.envs.flicker import Flicker
from border_py.errors import ConfigError

__all__ = ["MinAtarEnvFactory", "register_minatar"]

GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")


def register_minatar() -> None:
    """Register MinAtar's ``MinAtar/<Game>-v0|v1`` ids in this process (once).

    Actors and the evaluator are fresh processes: each factory calls this before it makes an env.
    The modules ``minatar`` imports only to draw are imported when it first draws
    (:func:`~border_py.envs.deferred.defer_imports`).
    """
    if "MinAtar/Breakout-v1" in gym.registry:
        return
    defer_imports("seaborn", "matplotlib.pyplot")  # minatar draws with them; it runs without
    try:
        minatar_gym = importlib.import_module("minatar.gym")
    except ImportError as exc:
        raise ConfigError(
            f"env: MinAtar needs the minatar extra ({exc}); pip install 'border-py[minatar]'"
        ) from None
    minatar_gym.register_envs()


def channels_first(grid: np.ndarray) -> np.ndarray:
    """A MinAtar grid (H, W, C) of bools as uint8 0/1, channels first: (C, H, W)."""
    return np.ascontiguousarray(grid.transpose(2, 0, 1), dtype=np.uint8)


class MinAtarEnvFactory(GymEnvFactory):
    """Builds MinAtar games with uint8 channels-first observations.

    Args:
        id: a MinAtar id: ``MinAtar/<Game>-v1`` (the game's minimal action set: Breakout has 3
            actions) or ``-v0`` (all 6), Game one of Asterix, Breakout, Freeway, Seaquest,
            SpaceInvaders.
        sticky_action_prob: probability that the game repeats the previous action instead.
        difficulty_ramping: whether the games speed up as they go on (MinAtar's default).
        flicker: the probability that a step's whole screen is blank (0: never), as DRQN's
            flickering Atari: :class:`~border_py.envs.flicker.Flicker`, before ``wrappers``.
        frame_stack: observations are the last ``frame_stack`` screens (after the flicker, each
            drawn alone), their channels concatenated oldest first: ``(frame_stack * C, H, W)``
            for the MinAtar torso (1: the screen alone).
        max_episode_steps: a time limit in steps (null: none; MinAtar's games end by themselves).
        kwargs: more ``gymnasium.make`` keyword arguments.
        wrappers: gymnasium wrappers after the conversion (see :class:`GymEnvFactory`).
        backend: ``gymnasium``, ``gymnasium_async`` or ``vector``.
        vector: with ``backend=vector``: ``_target_``, a function of yours that builds the
            VectorEnv (``gymnasium.make_vec`` would skip this preprocessing: refused); see
            :class:`~border_py.envs.factory.GymEnvFactory`.
    """

    def __init__(
        self,
        id: str,
        sticky_action_prob: float = 0.1,
        difficulty_ramping: bool = True,
        flicker: float = 0.0,
        frame_stack: int = 1,
        max_episode_steps: int | None = None,
        kwargs: dict[str, Any] | None = None,
        wrappers: list[dict[str, Any]] | None = None,
        backend: str = "gymnasium",
        vector: dict[str, Any] | None = None,
    ) -> None:
        games = ", ".join(f"MinAtar/{game}-v1" for game in GAMES)
        ok = isinstance(id, str) and any(
            id in (f"MinAtar/{g}-v0", f"MinAtar/{g}-v1") for g in GAMES
        )
        require("id", ok, f"a MinAtar id ({games}, or -v0 for all 6 actions)", id)
        fraction("sticky_action_prob", sticky_action_prob)
        flag("difficulty_ramping", difficulty_ramping)
        fraction("flicker", flicker)
        positive("frame_stack", frame_stack, int)
        self.flicker, self.frame_stack = float(flicker), frame_stack
        extra = dict(kwargs or {})
        for key in ("sticky_action_prob", "difficulty_ramping"):
            require(f"kwargs.{key}", key not in extra, "set by its own key, not in kwargs", key)
        register_minatar()
        super().__init__(id, extra, max_episode_steps, wrappers, backend, vector)
        self.kwargs |= {
            "sticky_action_prob": float(sticky_action_prob),
            "difficulty_ramping": bool(difficulty_ramping),
        }

    def make_base(self, render_mode: str | None = None, training: bool = False) -> gym.Env:
        """The game with uint8 (C, H, W) observations, before ``env.wrappers``."""
        register_minatar()
        env = super().make_base(render_mode, training)
        h, w, c = env.observation_space.shape or ()
        space = gym.spaces.Box(0, 1, (c, h, w), np.uint8)
        env = TransformObservation(env, channels_first, space)
        if self.flicker:
            env = Flicker(env, self.flicker)
        if self.frame_stack == 1:
            return env
        stacked = gym.spaces.Box(0, 1, (self.frame_stack * c, h, w), np.uint8)
        return TransformObservation(FrameStackObservation(env, self.frame_stack), _merge, stacked)


def _merge(stack: np.ndarray) -> np.ndarray:
    """A stack of screens ``(k, C, H, W)`` as one of ``k * C`` channels, oldest first."""
    return stack.reshape(-1, *stack.shape[2:])
