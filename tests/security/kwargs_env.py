"""A test env that takes any keyword argument (credentials a user hands to an env of their own)
and checks that the run gave it the real values, not the redacted record."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv


class AnyKwargs(CartPoleEnv):
    """CartPole that takes any keyword argument: it raises unless the SHA-256 of the others (as
    sorted JSON) is ``digest``, then creates ``<seen_dir>/<pid>``."""

    def __init__(self, digest: str, seen_dir: str, render_mode: str | None = None, **given: Any):
        super().__init__(render_mode=render_mode)
        if hashlib.sha256(json.dumps(given, sort_keys=True).encode()).hexdigest() != digest:
            raise RuntimeError("not the values the test gave")
        Path(seen_dir, str(os.getpid())).touch()


gym.register("AnyKwargs-v0", entry_point=AnyKwargs, max_episode_steps=500)
