"""``env.backend=gymnasium_async``: each env in its own subprocess (gymnasium's
``AsyncVectorEnv``), so that a slow simulator's steps overlap instead of running one after another.

The subprocesses are started with ``spawn`` (never the global start method), with SIGINT ignored
(a Ctrl-C is the learner's to handle: the actor's staged stop closes them), and die with the
thread that started them (Linux's parent-death signal): an actor killed with SIGKILL leaves none
behind. ``AsyncVectorEnv`` runs in its ``SAME_STEP`` autoreset mode: the step that ends an episode
returns the next episode's first observation and the final one in ``info["final_obs"]``, which is
what :class:`~border_py.envs.vector.VectorStep` holds as ``next_obs``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

from border_py.envs.vector import EpisodeTally, VectorStep
from border_py.processes.children import die_with_parent, signals_ignored

__all__ = ["AsyncVector"]

START_METHOD = "spawn"
CLOSE_TIMEOUT = 10.0  # seconds close() waits for the subprocesses before terminating them


class _InWorker:
    """An env builder that first makes its subprocess ignore SIGINT and die with its parent.

    Args:
        make: builds the env (in the subprocess).
    """

    def __init__(self, make: Callable[[], gym.Env]) -> None:
        self.make = make

    def __call__(self) -> gym.Env:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        die_with_parent()
        return self.make()


class AsyncVector:
    """``n_envs`` envs stepped in subprocesses, with the :class:`VectorEnv` contract.

    Args:
        make: builds one env (called in each subprocess; it must pickle).
        n_envs: envs (subprocesses).
        seed: env ``i``'s first reset is seeded with ``seed + i``, as :class:`VectorEnv` does.
    """

    backend = "gymnasium_async"

    def __init__(self, make: Callable[[], gym.Env], n_envs: int, seed: int) -> None:
        with signals_ignored(signal.SIGINT):  # the subprocesses inherit it from their start on
            self.env = AsyncVectorEnv(
                [_InWorker(make) for _ in range(n_envs)],
                context=START_METHOD,
                autoreset_mode=AutoresetMode.SAME_STEP,
            )
        self.num_envs = n_envs
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self.action_space.seed(seed)
        self.obs, _ = self.env.reset(seed=seed)
        self.tally = EpisodeTally(n_envs)
        self._closed = False

    def step(self, actions: np.ndarray) -> VectorStep:
        """Step every env once with ``actions`` (batched)."""
        obs, rewards, terms, truncs, info = self.env.step(actions)
        reward = np.asarray(rewards, dtype=np.float32)
        terminated = np.asarray(terms, dtype=bool)
        truncated = np.asarray(truncs, dtype=bool)
        done = terminated | truncated
        next_obs = obs
        if done.any():  # the final observations of the ended episodes come in the info
            next_obs = obs.copy()
            for i in np.flatnonzero(done):
                next_obs[i] = info["final_obs"][i]
        returns, lengths = self.tally.add(reward, done)
        self.obs = obs
        return VectorStep(next_obs, obs, reward, terminated, truncated, returns, lengths)

    def state(self) -> dict[str, Any]:
        """Only the backend's name: subprocess envs are not checkpointed (a resume starts fresh
        episodes)."""
        return {"backend": self.backend}

    def close(self) -> None:
        """Close the subprocesses, terminating those that do not finish within
        :data:`CLOSE_TIMEOUT` (idempotent)."""
        if not self._closed:
            self._closed = True
            self.env.close(timeout=CLOSE_TIMEOUT)
