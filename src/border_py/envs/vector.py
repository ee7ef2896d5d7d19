"""The vector-env adapter actors and the serial trainer step.

It keeps ``terminated`` (a true end: no bootstrap) and ``truncated`` (a time limit: bootstrap
from the final observation) apart, and hands the final observation of an ended episode back
separately from the first observation of the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import SyncVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics


class EpisodeLog(gym.Wrapper):
    """Remembers how the current episode began (reset seed, or the env's RNG state before the reset)
    and every action since, so that the env's exact state can be rebuilt by replaying them.

    This is how a checkpoint captures envs that cannot be serialized: any gymnasium env whose
    randomness comes from its ``np_random`` is restored exactly (envs with other hidden RNGs,
    e.g. ALE's, are restored to a state with the same history but not the same future).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.start: dict[str, Any] = {}
        self.actions: list[Any] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            self.start = {"seed": int(seed)}
        else:
            self.start = {"rng": self.env.np_random.bit_generator.state}
        self.actions = []
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any):
        self.actions.append(np.asarray(action).tolist())
        return self.env.step(action)

    def replay(self, start: dict[str, Any], actions: list[Any]) -> np.ndarray:
        """Rebuild an episode from ``start`` and ``actions``; return the observation reached."""
        if "seed" in start:
            obs, _ = self.reset(seed=start["seed"])
        else:
            self.env.np_random.bit_generator.state = start["rng"]
            obs, _ = self.reset()
        space = self.env.action_space
        for action in actions:
            obs, *_ = self.step(np.asarray(action, dtype=space.dtype))
        return obs


@dataclass
class VectorStep:
    """What one step of ``n`` envs returns, per env.

    ``next_obs`` is the observation that follows the action (the final one when the episode ended),
    ``obs`` the one to act on next (the first of a new episode after an end).
    """

    next_obs: np.ndarray
    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_returns: list[float]
    episode_lengths: list[int]


class VectorEnv:
    """A gymnasium vector env with same-step autoreset, episode statistics and a seeded first reset."""

    def __init__(self, env: SyncVectorEnv, seed: int) -> None:
        self._sync = env
        self.env = RecordEpisodeStatistics(env, buffer_length=1)
        self.num_envs = env.num_envs
        self.observation_space = env.single_observation_space
        self.action_space = env.single_action_space
        self.env.action_space.seed(seed)
        self.obs, _ = self.env.reset(seed=seed)

    def step(self, actions: np.ndarray) -> VectorStep:
        """Step every env once with ``actions`` (batched)."""
        obs, reward, terminated, truncated, info = self.env.step(actions)
        next_obs = obs
        done = terminated | truncated
        returns: list[float] = []
        lengths: list[int] = []
        if done.any():
            next_obs = obs.copy()
            for i in np.flatnonzero(done):
                next_obs[i] = info["final_obs"][i]
            episode = info["episode"]
            returns = [float(episode["r"][i]) for i in np.flatnonzero(done)]
            lengths = [int(episode["l"][i]) for i in np.flatnonzero(done)]
        self.obs = obs
        return VectorStep(
            next_obs, obs, reward.astype(np.float32), terminated, truncated, returns, lengths
        )

    def _logs(self) -> list[EpisodeLog]:
        """The envs' episode logs (a replayable vector env, see ``GymEnvFactory.make_vector``)."""
        logs = [env for env in self._sync.envs if isinstance(env, EpisodeLog)]
        if len(logs) != self.num_envs:
            raise RuntimeError(
                "the envs were built without replayable=True: they keep no episode log"
            )
        return logs

    def state(self) -> dict[str, Any]:
        """What :meth:`restore` needs to put every env back where it is now (plain data)."""
        logs = self._logs()
        return {
            "episodes": [{"start": log.start, "actions": list(log.actions)} for log in logs],
            "episode_returns": self.env.episode_returns.tolist(),
            "episode_lengths": self.env.episode_lengths.tolist(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Replay each env's current episode so that the envs are exactly as when ``state`` was taken."""
        logs = self._logs()
        for i, (log, episode) in enumerate(zip(logs, state["episodes"], strict=True)):
            self.obs[i] = log.replay(episode["start"], episode["actions"])
        self.env.episode_returns[:] = state["episode_returns"]
        self.env.episode_lengths[:] = state["episode_lengths"]

    def close(self) -> None:
        """Close every env (idempotent)."""
        self.env.close()
