"""A test wrapper whose steps are slow on some reset seeds only: a run whose final evaluation (its
own reset seeds) plays like a slow env's, its training and selection evaluations at full speed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym


class SlowOnSeeds(gym.Wrapper):
    """Each step of an episode reset with a seed in ``[first, last]`` takes ``step_seconds`` more;
    the first such reset creates ``flag`` (how a test knows the slow episodes have begun)."""

    def __init__(
        self, env: gym.Env, first: int, last: int, flag: str, step_seconds: float = 0.2
    ) -> None:
        super().__init__(env)
        self.first, self.last, self.flag = first, last, Path(flag)
        self.step_seconds = step_seconds
        self.slow = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        self.slow = seed is not None and self.first <= seed <= self.last
        if self.slow:
            self.flag.touch()
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        if self.slow:
            time.sleep(self.step_seconds)
        return self.env.step(action)
