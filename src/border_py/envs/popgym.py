"""POPGym (Morad et al., ICLR 2023; ``env=popgym``, the ``[popgym]`` extra): partially
observable tasks (cards to repeat or count, cart-poles without velocities, ...) registered as
gymnasium ids ``popgym-<Task><Easy|Medium|Hard>-v0`` when ``popgym`` is imported.

Most of POPGym's observations are Discrete or MultiDiscrete (a card's suit, a count), which the
agents' MLP torsos cannot take as they are: :class:`OneHotObservation` turns them into a float32
``Box`` of 0s and 1s, one one-hot block per discrete part (Discrete(4) -> 4 floats,
MultiDiscrete([2, 2]) -> 2 + 2, a Tuple of them -> the blocks in order); a Box part is cast to
float32 as it is. :class:`PopGymEnvFactory` registers the ids and applies it before
``env.wrappers``.
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.config import require
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError

__all__ = ["OneHotObservation", "PopGymEnvFactory", "register_popgym"]


def register_popgym() -> None:
    """Register POPGym's ids in this process (importing ``popgym`` does; once).

    Raises:
        ConfigError: ``popgym`` is not installed.
    """
    try:
        importlib.import_module("popgym")
    except ImportError as exc:
        raise ConfigError(
            f"env: POPGym needs the popgym extra ({exc}); pip install 'border-py[popgym]'"
        ) from None


def _parts(space: gym.Space) -> list[gym.Space]:
    """The Discrete, MultiDiscrete and Box parts of ``space`` in order (a Tuple's flattened)."""
    if isinstance(space, gym.spaces.Tuple):
        return [part for inner in space.spaces for part in _parts(inner)]
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.Box):
        return [space]
    raise ConfigError(
        f"env: OneHotObservation takes Discrete, MultiDiscrete, Box or Tuple observations, not"
        f" {space}"
    )


def _width(part: gym.Space) -> int:
    if isinstance(part, gym.spaces.Discrete):
        return int(part.n)
    if isinstance(part, gym.spaces.MultiDiscrete):
        return int(np.sum(part.nvec))
    return int(np.prod(part.shape or ()))


class OneHotObservation(gym.ObservationWrapper):
    """Discrete observations as one-hot float32 vectors (see the module docstring).

    Args:
        env: an env whose observations are Discrete, MultiDiscrete, Box or a Tuple of them.

    Raises:
        ConfigError: another observation space.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.parts = _parts(env.observation_space)
        width = sum(_width(part) for part in self.parts)
        low = np.concatenate([self._bound(part, "low") for part in self.parts])
        high = np.concatenate([self._bound(part, "high") for part in self.parts])
        self.observation_space = gym.spaces.Box(low, high, (width,), np.float32)

    @staticmethod
    def _bound(part: gym.Space, which: str) -> np.ndarray:
        if isinstance(part, gym.spaces.Box):
            return np.asarray(getattr(part, which), dtype=np.float32).reshape(-1)
        return np.full(_width(part), 0.0 if which == "low" else 1.0, dtype=np.float32)

    def observation(self, observation: Any) -> np.ndarray:
        """The one-hot blocks of ``observation``'s parts, concatenated."""
        return np.concatenate(_encode(self.env.observation_space, observation))


def _encode(space: gym.Space, value: Any) -> list[np.ndarray]:
    """``value`` of ``space`` as float32 blocks: one-hot per discrete part, a Box's as it is."""
    if isinstance(space, gym.spaces.Tuple):
        return [b for inner, v in zip(space.spaces, value, strict=True) for b in _encode(inner, v)]
    if isinstance(space, gym.spaces.Box):
        return [np.asarray(value, dtype=np.float32).reshape(-1)]
    assert isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete)  # _parts checked
    sizes = np.asarray(space.n if isinstance(space, gym.spaces.Discrete) else space.nvec)
    codes = (np.asarray(value) - np.asarray(space.start)).reshape(-1)
    blocks = []
    for size, code in zip(sizes.reshape(-1).tolist(), codes.tolist(), strict=True):
        block = np.zeros(size, dtype=np.float32)
        block[code] = 1.0
        blocks.append(block)
    return blocks


class PopGymEnvFactory(GymEnvFactory):
    """Builds POPGym tasks with one-hot float observations (:class:`OneHotObservation`).

    Args:
        id: a POPGym id, ``popgym-<Task><Easy|Medium|Hard>-v0`` (e.g.
            ``popgym-RepeatPreviousEasy-v0``).
        max_episode_steps: a time limit in steps (null: none; POPGym's tasks end by themselves).
        kwargs: more ``gymnasium.make`` keyword arguments.
        wrappers: gymnasium wrappers after the one-hot encoding (see :class:`GymEnvFactory`).
        backend: ``gymnasium``, ``gymnasium_async`` or ``vector``.
        vector: with ``backend=vector``: ``_target_``, a function of yours that builds the
            VectorEnv (``gymnasium.make_vec`` would skip this preprocessing: refused); see
            :class:`~border_py.envs.factory.GymEnvFactory`.

    Raises:
        ConfigError: popgym is not installed, or ``id`` is not one of its ids.
    """

    def __init__(
        self,
        id: str,
        max_episode_steps: int | None = None,
        kwargs: dict[str, Any] | None = None,
        wrappers: list[dict[str, Any]] | None = None,
        backend: str = "gymnasium",
        vector: dict[str, Any] | None = None,
    ) -> None:
        register_popgym()
        ok = isinstance(id, str) and id.startswith("popgym-")
        require("id", ok, "a POPGym id: popgym-<Task><Easy|Medium|Hard>-v0", id)
        super().__init__(id, kwargs, max_episode_steps, wrappers, backend, vector)

    def make_base(self, render_mode: str | None = None, training: bool = False) -> gym.Env:
        """The task with one-hot float32 observations, before ``env.wrappers``."""
        register_popgym()
        return OneHotObservation(super().make_base(render_mode, training))
