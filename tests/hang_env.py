"""A test env whose ``step`` never returns, once: a hung env for the heartbeat tests."""

from __future__ import annotations

import os
import time
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class HangOnce(CartPoleEnv):
    """CartPole whose step ``hang_after`` blocks forever, in the first process to get there.

    The first process creates ``flag`` (an exclusive create) and hangs; every other process, and
    the restarted actor, steps normally.
    """

    def __init__(self, hang_after: int = 100, flag: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.hang_after, self.flag = hang_after, flag
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.flag and self.steps == self.hang_after and _first(Path(self.flag)):
            while True:  # a step that never returns (a deadlock, a stuck simulator)
                time.sleep(3600)
        return super().step(action)


def _first(flag: Path) -> bool:
    try:
        os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


gym.register("HangOnce-v0", entry_point=HangOnce, max_episode_steps=500)
