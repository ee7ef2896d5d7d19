"""A test env with a Dict observation space: CartPole whose state comes as two named parts.

``{"cart": [x, x_dot], "pole": [theta, theta_dot]}``; gymnasium's ``FlattenObservation`` turns it
back into CartPole's 4-vector (Dict keys flatten in sorted order), so it learns like CartPole-v1.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv


class DictCartPole(CartPoleEnv):
    """CartPole-v1 with observations ``{"cart": Box(2), "pole": Box(2)}``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        box = self.observation_space
        self.observation_space = spaces.Dict(
            {
                "cart": spaces.Box(box.low[:2], box.high[:2], dtype=np.float32),
                "pole": spaces.Box(box.low[2:], box.high[2:], dtype=np.float32),
            }
        )

    @staticmethod
    def _split(state: np.ndarray) -> dict[str, np.ndarray]:
        return {"cart": state[:2].copy(), "pole": state[2:].copy()}

    def reset(self, *, seed=None, options=None):
        state, info = super().reset(seed=seed, options=options)
        return self._split(state), info

    def step(self, action):
        state, reward, terminated, truncated, info = super().step(action)
        return self._split(state), reward, terminated, truncated, info


gym.register("DictCartPole-v0", entry_point=DictCartPole, max_episode_steps=500)
