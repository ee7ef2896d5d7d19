"""``Pixels-v0``: stacked uint8 frames of (4, 36, 36), the smallest the Nature CNN takes, so that
a pixel policy (CNN torso) trains in seconds. Reward 1 for the action that matches the parity of
the frame's brightest column; episodes of 20 steps."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

SHAPE = (4, 36, 36)


class Pixels(gym.Env):
    """Random frames; the action that pays is a function of the frame."""

    observation_space = gym.spaces.Box(0, 255, SHAPE, np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self) -> None:
        self.frame = np.zeros(SHAPE, np.uint8)
        self.t = 0

    def _draw(self) -> np.ndarray:
        self.frame = self.np_random.integers(0, 256, SHAPE, dtype=np.uint8)
        return self.frame

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def step(self, action):
        column = int(self.frame[-1].sum(axis=0).argmax())
        reward = float(int(action) == column % 3)
        self.t += 1
        return self._draw(), reward, False, self.t >= 20, {}


gym.register("Pixels-v0", entry_point=Pixels)
