"""A gymnasium ``VectorEnv`` in its ``SAME_STEP`` autoreset mode, with the
:class:`~border_py.envs.vector.VectorEnv` contract: any such env can be an actor's envs.

In ``SAME_STEP`` mode the step that ends an episode returns the next episode's first observation
and the final one in ``info["final_obs"]``, which is what
:class:`~border_py.envs.vector.VectorStep` holds as ``next_obs``. Episode returns and lengths are
counted here (:class:`~border_py.envs.vector.EpisodeTally`), from the rewards the actor trains on,
whatever the env's wrappers put in its infos.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from border_py.envs.vector import EpisodeTally, VectorStep

__all__ = ["GymVector"]


class GymVector:
    """``env``'s envs stepped with the :class:`~border_py.envs.vector.VectorEnv` contract.

    Args:
        env: a gymnasium ``VectorEnv`` that autoresets in ``SAME_STEP`` mode (the caller checked).
        seed: env ``i``'s first reset is seeded with ``seed + i``, as
            :class:`~border_py.envs.vector.VectorEnv` does (``env.reset(seed=[seed, seed + 1,
            ...])``); the action space's sampling with ``seed``.
    """

    backend = "vector"

    def __init__(self, env: gym.vector.VectorEnv, seed: int) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.observation_space = env.single_observation_space
        self.action_space = env.single_action_space
        self.action_space.seed(seed)
        seeds = [seed + i for i in range(self.num_envs)]  # each env's, whatever an int would mean
        self.obs, _ = env.reset(seed=seeds)  # type: ignore[arg-type]  # gymnasium's take lists
        self.tally = EpisodeTally(self.num_envs)
        self._closed = False

    def step(self, actions: np.ndarray) -> VectorStep:
        """Step every env once with ``actions`` (batched).

        Raises:
            RuntimeError: an episode ended and the env's info holds no ``final_obs`` (not a
                ``SAME_STEP`` env after all).
        """
        obs, rewards, terms, truncs, info = self.env.step(actions)
        reward = np.asarray(rewards, dtype=np.float32)
        terminated = np.asarray(terms, dtype=bool)
        truncated = np.asarray(truncs, dtype=bool)
        done = terminated | truncated
        next_obs = obs
        if done.any():  # the final observations of the ended episodes come in the info
            if "final_obs" not in info:
                raise RuntimeError(
                    f"env.backend={self.backend}: episodes ended but the step's info has no"
                    " 'final_obs' (a SAME_STEP VectorEnv gives the final observations there)"
                )
            next_obs = obs.copy()
            for i in np.flatnonzero(done):
                next_obs[i] = info["final_obs"][i]
        returns, lengths = self.tally.add(reward, done)
        self.obs = obs
        return VectorStep(next_obs, obs, reward, terminated, truncated, returns, lengths)

    def state(self) -> dict[str, Any]:
        """Only the backend's name: a vector env is not checkpointed (a resume starts fresh
        episodes)."""
        return {"backend": self.backend}

    def close(self) -> None:
        """Close the envs (idempotent)."""
        if not self._closed:
            self._closed = True
            self._close()

    def _close(self) -> None:
        self.env.close()
