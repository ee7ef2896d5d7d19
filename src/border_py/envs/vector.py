"""The vector-env adapter actors and the serial trainer step.

It keeps ``terminated`` (a true end: no bootstrap) and ``truncated`` (a time limit: bootstrap
from the final observation) apart, and hands the final observation of an ended episode back
separately from the first observation of the next one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

__all__ = ["BatchedEnv", "EpisodeLog", "EpisodeTally", "VectorEnv", "VectorStep"]


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


class BatchedEnv(Protocol):
    """What an actor steps, whatever ``env.backend`` (:mod:`border_py.envs.backends`): ``obs``
    the observations to act on, ``step`` one batched action for every env, same-step autoreset.

    Only :class:`VectorEnv` can be restored from its :meth:`state`; the other backends' state only
    names them (a resumed run starts fresh episodes)."""

    backend: str  # its env.backend
    num_envs: int
    obs: np.ndarray
    observation_space: gym.Space
    action_space: gym.Space

    def step(self, actions: np.ndarray) -> VectorStep:
        """Step every env once with ``actions`` (batched)."""
        ...

    def state(self) -> dict[str, Any]:
        """Plain data for a checkpoint."""
        ...

    def close(self) -> None:
        """Close the envs (idempotent)."""
        ...


class EpisodeTally:
    """The return and length of the episode running in each of ``n`` envs.

    Args:
        n: envs.
    """

    def __init__(self, n: int) -> None:
        self.returns = np.zeros(n)
        self.lengths = np.zeros(n, dtype=np.int64)

    def add(self, reward: np.ndarray, done: np.ndarray) -> tuple[list[float], list[int]]:
        """Count one step of every env; the returns and lengths of the episodes ``done`` ended
        (by env index), whose counts start over."""
        self.returns += reward
        self.lengths += 1
        if not done.any():
            return [], []
        ended = np.flatnonzero(done)
        returns, lengths = self.returns[ended].tolist(), self.lengths[ended].tolist()
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        return returns, lengths


class VectorEnv:
    """``n`` envs stepped together with one batched action, same-step autoreset (the step that
    ends an episode returns the next episode's first observation), and episode statistics.

    It is gymnasium's ``SyncVectorEnv`` with ``AutoresetMode.SAME_STEP`` and
    ``RecordEpisodeStatistics``, done in one small loop: those two cost a large share of an actor's
    time on a cheap env such as CartPole, in their info dicts (``benchmarks/async_throughput.py``;
    the figures: docs/04-scaling/performance.md). Env ``i``'s first reset is seeded with
    ``seed + i``, as gymnasium's vector envs seed them.

    Args:
        envs: the envs (the same spaces).
        seed: the first reset's base seed.
    """

    backend = "gymnasium"

    def __init__(self, envs: list[gym.Env], seed: int) -> None:
        self.envs = envs
        self.num_envs = len(envs)
        self.observation_space = envs[0].observation_space
        self.action_space = envs[0].action_space
        self.action_space.seed(seed)
        self.obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
        self.episode_returns = np.zeros(self.num_envs)
        self.episode_lengths = np.zeros(self.num_envs, dtype=np.int64)

    def step(self, actions: np.ndarray) -> VectorStep:
        """Step every env once with ``actions`` (batched)."""
        results = [env.step(action) for env, action in zip(self.envs, actions, strict=True)]
        next_list, rewards, terms, truncs, _ = zip(*results, strict=True)
        next_obs = np.array(next_list, dtype=self.obs.dtype)
        reward = np.array(rewards, dtype=np.float32)
        terminated = np.array(terms, dtype=bool)
        truncated = np.array(truncs, dtype=bool)
        self.episode_returns += reward
        self.episode_lengths += 1
        if not (any(terms) or any(truncs)):  # no episode ended: the next observations are acted on
            self.obs = next_obs
            return VectorStep(next_obs, next_obs, reward, terminated, truncated, [], [])
        obs = next_obs.copy()  # the first observations of new episodes replace the final ones
        returns: list[float] = []
        lengths: list[int] = []
        for i, (term, trunc) in enumerate(zip(terms, truncs, strict=True)):
            if term or trunc:
                obs[i] = self.envs[i].reset()[0]
                returns.append(float(self.episode_returns[i]))
                lengths.append(int(self.episode_lengths[i]))
                self.episode_returns[i] = 0.0
                self.episode_lengths[i] = 0
        self.obs = obs
        return VectorStep(next_obs, obs, reward, terminated, truncated, returns, lengths)

    def _logs(self) -> list[EpisodeLog]:
        """The envs' episode logs (a replayable vector env, see ``GymEnvFactory.make_vector``)."""
        logs = [env for env in self.envs if isinstance(env, EpisodeLog)]
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
            "episode_returns": self.episode_returns.tolist(),
            "episode_lengths": self.episode_lengths.tolist(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Replay each env's current episode so that the envs are exactly as when ``state`` was taken."""
        logs = self._logs()
        self.obs = self.obs.copy()  # a step's arrays may be this one: they are never written to
        for i, (log, episode) in enumerate(zip(logs, state["episodes"], strict=True)):
            self.obs[i] = log.replay(episode["start"], episode["actions"])
        self.episode_returns[:] = state["episode_returns"]
        self.episode_lengths[:] = state["episode_lengths"]

    def close(self) -> None:
        """Close every env (idempotent)."""
        for env in self.envs:
            env.close()
