"""The ``env`` config group: a factory of gymnasium envs (any registered id) and their spaces."""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from border_py.config import build, closest, require
from border_py.envs.vector import EpisodeLog, VectorEnv
from border_py.errors import ConfigError


class GymEnvFactory:
    """Builds gymnasium envs from an id (any registered id, including ``module:Env-v0``).

    Args:
        id: gymnasium environment id.
        kwargs: extra keyword arguments for ``gymnasium.make``.
        max_episode_steps: override of the registered time limit (None keeps it).

    Attributes:
        eval_epsilon: the probability of a random action in evaluation episodes that this kind of
            env's protocol uses (see :class:`~border_py.evaluation.evaluator.Evaluator`): 0, greedy.
    """

    eval_epsilon: float = 0.0

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
        here, subclasses may differ (e.g. Atari's reward clipping, see :mod:`border_py.envs.atari`).
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


def build_env_factory(config: dict[str, Any]) -> GymEnvFactory:
    """The ``env`` group's factory, from the resolved run config."""
    return build("env", config["env"])
