"""A test env that raises after a number of steps (crash injection for actor restarts)."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class CrashAfter(CartPoleEnv):
    """CartPole that raises ``RuntimeError('injected crash')`` at step ``crash_after`` of its life."""

    def __init__(self, crash_after: int = 100, **kwargs) -> None:
        super().__init__(**kwargs)
        self.crash_after = crash_after
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps >= self.crash_after:
            raise RuntimeError("injected crash")
        return super().step(action)


gym.register("CrashAfter-v0", entry_point=CrashAfter, max_episode_steps=500)
