"""The ``env`` config group: a factory of gymnasium envs (any registered id) and their spaces.

``env.wrappers`` is an ordered list of gymnasium wrappers (gymnasium's own or the user's), each a
``_target_`` and its keyword arguments, applied to the actors' and the evaluation envs alike, or
with ``training_only: true`` / ``evaluation_only: true`` to one kind of env only.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from border_py.config import build, closest, flag, require, resolve_target
from border_py.envs.async_vector import AsyncVector
from border_py.envs.backends import check_backend
from border_py.envs.gym_vector import GymVector
from border_py.envs.user_vector import build_vector, check_vector, vector_spec
from border_py.envs.vector import BatchedEnv, EpisodeLog, VectorEnv
from border_py.errors import ConfigError, first_line

__all__ = ["GymEnvFactory", "build_env_factory"]

SWITCHES = ("training_only", "evaluation_only")  # keys of a wrapper spec that are not its arguments


@dataclass(frozen=True)
class WrapperSpec:
    """One checked entry of ``env.wrappers``.

    Attributes:
        name: where it sits in the config, e.g. ``wrappers[0]``.
        spec: its ``_target_`` and keyword arguments (the env comes at build time).
        training_only: wraps the actors' envs only.
        evaluation_only: wraps the evaluation envs (and ``border eval``'s) only.
    """

    name: str
    spec: dict[str, Any]
    training_only: bool = False
    evaluation_only: bool = False

    def applies(self, training: bool) -> bool:
        """Whether this wrapper wraps a training (actor) env, or an evaluation env."""
        return not (self.evaluation_only if training else self.training_only)

    def wrap(self, env: gym.Env) -> gym.Env:
        """``env`` inside this wrapper.

        A config can only give Python floats, which a float32 ``Box`` built from them (e.g.
        ``RescaleObservation``'s ``min_obs: -1.0``) casts with a warning per env: not shown.
        """
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32")
            return build(f"env.{self.name}", self.spec, env=env)


def wrapper_specs(wrappers: Any) -> list[WrapperSpec]:
    """Check ``env.wrappers`` (a list of ``{_target_: ..., <arguments>, training_only: bool}``).

    The arguments are checked against the wrapper's signature when it is first built (the
    trainers build one env before anything starts, see :meth:`GymEnvFactory.spaces`).

    Raises:
        ConfigError: one line naming ``wrappers[i]`` and the bad key.
    """
    require(
        "wrappers",
        isinstance(wrappers, list),
        "a list of wrapper specs, e.g. [{_target_: gymnasium.wrappers.FlattenObservation}]",
        wrappers,
    )
    specs = []
    for i, entry in enumerate(wrappers):
        name = f"wrappers[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("_target_"), str):
            raise ConfigError(
                f"{name}={entry!r}: must be a mapping with a '_target_' (a wrapper class, e.g."
                " gymnasium.wrappers.FlattenObservation) and its keyword arguments"
            )
        try:
            target = resolve_target(entry["_target_"])
        except ConfigError as exc:
            raise ConfigError(f"{name}.{exc}") from None
        require(f"{name}._target_", callable(target), "a wrapper class", entry["_target_"])
        params = inspect.signature(target).parameters
        require(
            f"{name}._target_",
            "env" in params,
            "a wrapper that takes the env as its 'env' argument (as gymnasium's wrappers do)",
            entry["_target_"],
        )
        for switch in SWITCHES:
            flag(f"{name}.{switch}", entry.get(switch, False))
        if entry.get("training_only") and entry.get("evaluation_only"):
            raise ConfigError(f"{name}: training_only and evaluation_only cannot both be true")
        spec = {k: v for k, v in entry.items() if k not in SWITCHES}
        specs.append(
            WrapperSpec(
                name,
                spec,
                bool(entry.get("training_only", False)),
                bool(entry.get("evaluation_only", False)),
            )
        )
    return specs


class GymEnvFactory:
    """Builds gymnasium envs from an id (any registered id, including ``module:Env-v0``).

    Args:
        id: gymnasium environment id.
        kwargs: extra keyword arguments for ``gymnasium.make``.
        max_episode_steps: override of the registered time limit (None keeps it).
        wrappers: gymnasium wrappers applied in order after ``gymnasium.make``, each
            ``{_target_: <class>, <its keyword arguments>}`` plus an optional ``training_only:
            true`` (actors' envs only) or ``evaluation_only: true`` (evaluation envs only).
        backend: what steps an actor's envs (:mod:`border_py.envs.backends`): ``gymnasium`` (one
            after another in the actor's process) or ``gymnasium_async`` (one subprocess each;
            not checkpointed: a resumed serial run starts fresh episodes), ``vector`` (a
            gymnasium ``VectorEnv`` of yours, ``vector``; not checkpointed either); Atari envs
            also ``envpool`` and ``ale_vector``. Evaluation envs are always gymnasium's.
        vector: with ``backend=vector``, the VectorEnv (:mod:`border_py.envs.user_vector`): a
            ``_target_`` of yours called with ``num_envs`` and the other keys, or
            ``gymnasium.make_vec``'s ``vectorization_mode`` and ``vector_kwargs`` (null: sync).

    Attributes:
        eval_epsilon: the probability of a random action in evaluation episodes that this kind of
            env's protocol uses (see :class:`~border_py.evaluation.evaluator.Evaluator`): 0, greedy.
        final_eval_episodes: the episodes of a run's final evaluations when
            ``trainer.final_eval_episodes`` is null: 100, as RL Zoo's and the literature's final
            scores of classic-control and MuJoCo tasks.
    """

    eval_epsilon: float = 0.0
    final_eval_episodes: int = 100
    atari: bool = False  # whether the C++ Atari backends can step it

    def __init__(
        self,
        id: str,
        kwargs: dict[str, Any] | None = None,
        max_episode_steps: int | None = None,
        wrappers: list[dict[str, Any]] | None = None,
        backend: str = "gymnasium",
        vector: dict[str, Any] | None = None,
    ) -> None:
        self.backend = check_backend(backend, self.atari)
        self.vector = vector_spec(vector, self.backend)
        require("id", isinstance(id, str), "a gymnasium id string", id)
        require("kwargs", kwargs is None or isinstance(kwargs, dict), "a mapping (or null)", kwargs)
        self.wrappers = wrapper_specs([] if wrappers is None else wrappers)
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
            hint = closest(name, gym.registry.keys(), prefix=f"{module}:" if module else "")
            detail = hint or f" ({exc})"
            raise ConfigError(f"id={id!r}: not a registered gymnasium id{detail}") from None
        except ImportError as exc:
            raise ConfigError(f"id={id!r}: its module cannot be imported ({exc})") from None
        if self.vector is not None:
            self._check_vector_spec(self.vector)

    def _check_vector_spec(self, spec: dict[str, Any]) -> None:
        """Refuse what ``gymnasium.make_vec`` or the user's VectorEnv would silently leave out."""
        own = "_target_" in spec or spec["vectorization_mode"] == "vector_entry_point"
        if own and any(w.applies(training=True) for w in self.wrappers):
            how = "a _target_" if "_target_" in spec else "vectorization_mode=vector_entry_point"
            raise ConfigError(
                f"wrappers: with vector {how}, the actors' envs are the VectorEnv as built (no"
                " single env to wrap); wrap them where you build it, and mark these"
                " evaluation_only: true"
            )
        if "_target_" not in spec and type(self).make_base is not GymEnvFactory.make_base:
            raise ConfigError(
                f"vector: gymnasium.make_vec builds {self.id} as gymnasium registers it, without"
                f" {type(self).__name__}'s own preprocessing; give vector._target_, a function"
                " of yours that builds the VectorEnv"
            )

    def make(self, render_mode: str | None = None, training: bool = False) -> gym.Env:
        """One environment instance (seeded by the caller's first ``reset``), with the wrappers.

        ``training`` asks for an actor's env rather than an evaluation env: they differ by the
        ``training_only``/``evaluation_only`` wrappers, and in subclasses (e.g. Atari's reward
        clipping, see :mod:`border_py.envs.atari`).
        """
        env = self.make_base(render_mode, training)
        for wrapper in self.wrappers:
            if wrapper.applies(training):
                env = wrapper.wrap(env)
        return env

    def make_base(self, render_mode: str | None = None, training: bool = False) -> gym.Env:
        """The env before ``env.wrappers``: ``gymnasium.make`` of the id."""
        kwargs = dict(self.kwargs)
        if render_mode is not None:
            kwargs["render_mode"] = render_mode
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        return gym.make(self.id, **kwargs)

    def make_vector(self, n_envs: int, seed: int, replayable: bool = False) -> BatchedEnv:
        """``n_envs`` copies stepped together by ``backend``: :class:`VectorEnv` (``gymnasium``),
        :class:`~border_py.envs.async_vector.AsyncVector` (``gymnasium_async``) or the user's
        VectorEnv, checked (``vector``, :meth:`vector_env`).

        ``replayable`` logs each episode (:class:`EpisodeLog`) so that :meth:`VectorEnv.state`
        can capture the envs for a checkpoint; actors, whose envs are not checkpointed, skip it
        (so do the other backends, whose envs a resume starts afresh).
        """
        if self.backend == "gymnasium_async":
            return AsyncVector(functools.partial(self.make, training=True), n_envs, seed)
        if self.backend == "vector":
            return GymVector(self.vector_env(n_envs), seed)

        def make() -> gym.Env:
            env = self.make(training=True)
            return EpisodeLog(env) if replayable else env

        return VectorEnv([make() for _ in range(n_envs)], seed)

    def vector_env(self, n_envs: int) -> gym.vector.VectorEnv:
        """With ``backend=vector``, the user's VectorEnv of ``n_envs`` envs, checked against the
        evaluation env's spaces (:func:`~border_py.envs.user_vector.check_vector`); not reset.

        The trainers build one and close it before anything starts, so that a mistake is one
        line (exit 2), not an actor's failure.

        Raises:
            ConfigError: one line: it cannot be built, or the actors cannot step it.
        """
        assert self.vector is not None, "backend=vector only"
        wrappers = [w.wrap for w in self.wrappers if w.applies(training=True)]
        kwargs = dict(self.kwargs)
        if self.max_episode_steps is not None:
            kwargs["max_episode_steps"] = self.max_episode_steps
        spaces = self._spaces(training=False)
        return check_vector(
            build_vector(self.vector, self.id, kwargs, wrappers, n_envs), n_envs, spaces
        )

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        """(observation_space, action_space) of one instance, after the wrappers.

        A failure to build the env is a ConfigError; so are training and evaluation envs whose
        spaces differ (a ``training_only`` or ``evaluation_only`` wrapper that changes them).
        """
        spaces = self._spaces(training=False)
        if any(w.training_only or w.evaluation_only for w in self.wrappers):
            training = self._spaces(training=True)
            if training != spaces:
                raise ConfigError(
                    f"env.wrappers: the actors' envs have spaces {training} but the evaluation"
                    f" envs {spaces}; a wrapper that changes the spaces must wrap both (drop its"
                    " training_only/evaluation_only)"
                )
        return spaces

    def _spaces(self, training: bool) -> tuple[gym.Space, gym.Space]:
        try:
            env = self.make(training=training)
        except ConfigError:
            raise
        except Exception as exc:  # bad kwargs, a missing optional dependency, ...
            first = first_line(exc)
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
