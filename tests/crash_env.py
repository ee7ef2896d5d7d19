"""A test env that raises after a number of steps (crash injection for actor restarts)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class CrashAfter(CartPoleEnv):
    """CartPole that raises ``RuntimeError('injected crash')`` (or ``OSError``, with
    ``os_error=True``) at step ``crash_after`` of its life; with ``fork_pid_file``, it first forks
    a child that sleeps a minute holding every fd of the process, and writes the child's pid there."""

    def __init__(
        self,
        crash_after: int = 100,
        os_error: bool = False,
        fork_pid_file: str | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.crash_after = crash_after
        self.error = OSError if os_error else RuntimeError
        self.fork_pid_file = fork_pid_file
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.steps >= self.crash_after:
            if self.fork_pid_file is not None:
                pid = os.fork()
                if pid == 0:  # the child: hold the inherited pipes, then go
                    time.sleep(60)
                    os._exit(0)
                Path(self.fork_pid_file).write_text(str(pid))
            raise self.error("injected crash")
        return super().step(action)


gym.register("CrashAfter-v0", entry_point=CrashAfter, max_episode_steps=500)
