"""Gymnasium environments: the ``env`` config group's factory and the vector-env adapter.

The adapter keeps ``terminated`` (a true end: no bootstrap) and ``truncated`` (a time limit:
bootstrap from the final observation) apart, and hands the final observation of an ended
episode back separately from the first observation of the next one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from border_py.config import ConfigError, closest, require


class GymEnvFactory:
    """Builds gymnasium envs from an id (any registered id, including ``module:Env-v0``).

    Args:
        id: gymnasium environment id.
        kwargs: extra keyword arguments for ``gymnasium.make``.
        max_episode_steps: override of the registered time limit (None keeps it).
    """

    def __init__(
        self, id: str, kwargs: dict[str, Any] | None = None, max_episode_steps: int | None = None
    ) -> None:
        require("id", isinstance(id, str), "a gymnasium id string", id)
        require("kwargs", kwargs is None or isinstance(kwargs, dict), "a mapping (or null)", kwargs)
        self.id = id
        self.kwargs = dict(kwargs or {})
        self.max_episode_steps = max_episode_steps
        if max_episode_steps is not None:
            require(
                "max_episode_steps",
                max_episode_steps > 0,
                "a positive int or null",
                max_episode_steps,
            )
        module, _, name = id.rpartition(":")
        try:
            if module:
                importlib.import_module(module)  # registers its envs, as gymnasium.make would
            gym.spec(name)
        except gym.error.Error as exc:
            hint = closest(id.split(":")[-1], gym.registry.keys())
            detail = hint or f" ({exc})"
            raise ConfigError(f"id={id!r}: not a registered gymnasium id{detail}") from None
        except ImportError as exc:
            raise ConfigError(f"id={id!r}: its module cannot be imported ({exc})") from None

    def make(self, render_mode: str | None = None, training: bool = False) -> gym.Env:
        """One environment instance (seeded by the caller's first ``reset``).

        ``training`` asks for an actor's env rather than an evaluation env; they are the same
        here, subclasses may differ (e.g. Atari's reward clipping, see :mod:`border_py.atari`).
        """
        kwargs = dict(self.kwargs)
        if render_mode is not None:
            kwargs["render_mode"] = render_mode
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        return gym.make(self.id, **kwargs)

    def make_vector(self, n_envs: int, seed: int, replayable: bool = False) -> VectorEnv:
        """``n_envs`` copies stepped together, wrapped in :class:`VectorEnv`.

        ``replayable`` logs each episode (:class:`EpisodeLog`) so that :meth:`VectorEnv.state`
        can capture the envs for a checkpoint; actors, whose envs are not checkpointed, skip it.
        """

        def make() -> gym.Env:
            env = self.make(training=True)
            return EpisodeLog(env) if replayable else env

        envs = [make] * n_envs
        return VectorEnv(SyncVectorEnv(envs, autoreset_mode=AutoresetMode.SAME_STEP), seed)

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        """(observation_space, action_space) of one instance; a failure to build it is a ConfigError."""
        try:
            env = self.make()
        except Exception as exc:  # bad kwargs, a missing optional dependency, ...
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(
                f"env: cannot make {self.id!r} with kwargs {self.kwargs} ({first})"
            ) from None
        try:
            return env.observation_space, env.action_space
        finally:
            env.close()


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

    def state(self) -> dict[str, Any]:
        """What :meth:`restore` needs to put every env back where it is now (plain data)."""
        logs: list[EpisodeLog] = self.env.env.envs
        return {
            "episodes": [{"start": log.start, "actions": list(log.actions)} for log in logs],
            "episode_returns": self.env.episode_returns.tolist(),
            "episode_lengths": self.env.episode_lengths.tolist(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Replay each env's current episode so that the envs are exactly as when ``state`` was taken."""
        logs: list[EpisodeLog] = self.env.env.envs
        for i, (log, episode) in enumerate(zip(logs, state["episodes"], strict=True)):
            self.obs[i] = log.replay(episode["start"], episode["actions"])
        self.env.episode_returns[:] = state["episode_returns"]
        self.env.episode_lengths[:] = state["episode_lengths"]

    def close(self) -> None:
        """Close every env (idempotent)."""
        self.env.close()
