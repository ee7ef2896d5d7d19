"""``my_pkg.vector``: the docs' VectorEnv factory for ``env.backend=vector``."""

from __future__ import annotations

import gymnasium as gym
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import ClipReward


def make_envs(num_envs: int, max_reward: float = 1.0) -> gym.vector.VectorEnv:
    """``num_envs`` MyEnv-v0 stepped together, their rewards clipped (training only)."""
    envs = gym.make_vec(
        "MyEnv-v0",  # registered by importing my_pkg
        num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    return ClipReward(envs, max_reward=max_reward)
