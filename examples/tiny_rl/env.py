"""Corridor: walk right along a row of cells to the goal at its end.

Observation: the position as a one-hot float32 vector of length ``size``. Actions: 0 (left), 1
(right). Reward: -0.01 per step, +1 on reaching the goal, which ends the episode; the registered
time limit (50 steps) truncates it otherwise. The best return is 1 - 0.01 * (size - 2): 0.94 for
the default 8 cells. A random walk needs about size**2 steps, so exploration matters a little.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """A corridor of ``size`` cells, start at the left end, goal at the right end.

    Args:
        size: number of cells (at least 2).
        render_mode: ``"ansi"`` (a line of text per step) or None.
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, size: int = 8, render_mode: str | None = None) -> None:
        if size < 2:
            raise ValueError(f"size must be at least 2, got {size}")
        self.size = size
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(size,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.size, dtype=np.float32)
        obs[self.position] = 1.0
        return obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        move = 1 if int(action) == 1 else -1
        self.position = min(max(self.position + move, 0), self.size - 1)
        at_goal = self.position == self.size - 1
        return self._obs(), 1.0 if at_goal else -0.01, at_goal, False, {}

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        cells = ["." for _ in range(self.size)]
        cells[self.position] = "A"
        return "".join(cells)
