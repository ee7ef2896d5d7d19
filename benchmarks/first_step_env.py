"""An env that writes the wall-clock time of the first step any instance takes (the start-up
measurement of ``benchmarks/start_stop.py``)."""

from __future__ import annotations

import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class FirstStep(CartPoleEnv):
    """CartPole that records ``time.time()`` of its first step in ``stamp`` (first writer wins)."""

    def __init__(self, stamp: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.stamp, self.stepped = stamp, False

    def step(self, action):
        if not self.stepped and self.stamp:
            self.stepped = True
            try:
                fd = os.open(self.stamp, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.write(fd, repr(time.time()).encode())
                os.close(fd)
            except FileExistsError:
                pass
        return super().step(action)


gym.register("FirstStep-v0", entry_point=FirstStep, max_episode_steps=500)
