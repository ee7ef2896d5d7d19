"""Flickering observations, as DRQN's flickering Atari (Hausknecht & Stone 2015): at each step
the whole observation is blanked (all zeros) with probability ``p``, so that a memoryless agent
cannot tell where things are or which way they move from one frame. Gymnasium has no such
wrapper (its observation wrappers transform every observation alike).

The draws come from the wrapper's own generator, seeded by ``reset(seed=...)`` (the seed the env
itself gets, so an episode begun from a seed reproduces, frames and blanks alike) and carried on
by resets without a seed, as the env's own generator is. They do not touch the env's generator: a
game flickered or not plays the same.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from border_py.config import fraction
from border_py.errors import ConfigError

__all__ = ["Flicker"]


class Flicker(gym.ObservationWrapper):
    """Blanks the whole observation with probability ``p`` at every step, the first included.

    Args:
        env: an env with a ``Box`` observation space (a blank is an array of zeros of its dtype,
            which must lie in the space: MinAtar's and Atari's frames do).
        p: the probability of a blank observation, in [0, 1].

    Raises:
        ConfigError: ``p`` outside [0, 1], or a space that does not hold zeros.
    """

    def __init__(self, env: gym.Env, p: float = 0.5) -> None:
        super().__init__(env)
        fraction("flicker", p)
        space = env.observation_space
        ok = isinstance(space, gym.spaces.Box)
        blank = np.zeros(space.shape or (), space.dtype) if ok else None
        if blank is None or not space.contains(blank):
            raise ConfigError(f"flicker: needs a Box observation space holding zeros, not {space}")
        self.p, self.blank = float(p), blank
        self.rng = np.random.default_rng()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; a ``seed`` seeds the blanks' generator too."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        return super().reset(seed=seed, options=options)

    def observation(self, observation: Any) -> Any:
        """``observation``, or a blank with probability ``p``."""
        return self.blank.copy() if self.rng.random() < self.p else observation
