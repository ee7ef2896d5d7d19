"""VectorEnvs as a user's factory builds them, for ``env.backend=vector``'s tests
(``env.vector._target_: tests.vector_envs.<name>``)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorWrapper

STEPS = {"env": 0}  # env steps taken by the counting envs of this process


class CountSteps(VectorWrapper):
    """A vector wrapper that counts its envs' steps in :data:`STEPS`."""

    def step(self, actions: np.ndarray) -> Any:
        STEPS["env"] += self.num_envs
        return super().step(actions)


def cartpole(
    num_envs: int, max_episode_steps: int | None = None, autoreset_mode: str = "SameStep"
) -> gym.vector.VectorEnv:
    """CartPole in gymnasium's ``SyncVectorEnv`` inside a vector wrapper of the user's."""
    env = gym.make_vec(
        "CartPole-v1",
        num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode(autoreset_mode)},
        max_episode_steps=max_episode_steps,
    )
    return CountSteps(env)


def two_envs(num_envs: int) -> gym.vector.VectorEnv:
    """Two CartPoles, whatever ``num_envs`` asks."""
    return cartpole(2)


def pendulum(num_envs: int) -> gym.vector.VectorEnv:
    """Pendulum: not the spaces of a CartPole run's evaluation env."""
    return gym.make_vec("Pendulum-v1", num_envs, vector_kwargs={"autoreset_mode": "SameStep"})


def single(num_envs: int) -> gym.Env:
    """One env, not a VectorEnv."""
    return gym.make("CartPole-v1")
