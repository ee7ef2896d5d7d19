"""A test env that checks the token a run hands to its processes (an env kwarg, a variable)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

VARIABLE = "BORDER_TEST_TOKEN"


class TokenCheck(CartPoleEnv):
    """CartPole that checks the token it is given as ``api_key`` and the one in the environment
    variable ``BORDER_TEST_TOKEN``, where either is given: it raises unless the token's SHA-256 is
    ``digest`` (the test's token, not a redaction marker), then creates ``<seen_dir>/kwarg-<pid>``
    or ``<seen_dir>/env-<pid>``."""

    def __init__(self, digest: str, seen_dir: str, api_key: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        for source, token in (("kwarg", api_key), ("env", os.environ.get(VARIABLE))):
            if token is None:
                continue
            if hashlib.sha256(token.encode()).hexdigest() != digest:
                raise RuntimeError(f"{source}: not the token the test gave")
            Path(seen_dir, f"{source}-{os.getpid()}").touch()


gym.register("TokenCheck-v0", entry_point=TokenCheck, max_episode_steps=500)
