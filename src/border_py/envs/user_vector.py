"""``env.backend=vector``: a gymnasium ``VectorEnv`` of the user's as an actor's envs, from
``env.vector``:

- ``{_target_: my_pkg.make_envs, <its keyword arguments>}``: a function or class of yours,
  called with ``num_envs`` (the actor's ``n_envs_per_actor``) and those arguments, that returns a
  ``gymnasium.vector.VectorEnv`` (a JAX or GPU env, vector wrappers, ...). The ``_target_`` is
  imported under the trust rules of every ``_target_`` (:mod:`border_py.runs.trust`): a saved
  run's is imported only when the loading command names it or trusts it.
- else ``gymnasium.make_vec(env.id, num_envs, vectorization_mode, vector_kwargs, wrappers,
  **env.kwargs)`` with ``vectorization_mode`` ``sync`` (default), ``async`` or
  ``vector_entry_point`` (the env's own vector implementation) and ``vector_kwargs`` for the
  vector env's constructor. In ``sync`` and ``async`` modes ``wrappers`` are the actors'
  ``env.wrappers``, and border sets ``autoreset_mode`` to ``SAME_STEP`` (``async``: also
  ``context=spawn`` and subprocesses that ignore SIGINT and die with the actor) unless
  ``vector_kwargs`` says otherwise.

Whatever builds it, the env must autoreset in ``SAME_STEP`` mode (``metadata["autoreset_mode"]``:
the actor counts episodes and stores each final observation as a transition's ``next_obs``), hold
``num_envs`` envs, and have single spaces equal to the evaluation env's (evaluation and
``border eval`` play single envs built from ``env.id``, ``env.kwargs`` and ``env.wrappers``);
anything else is refused in one line.
"""

from __future__ import annotations

import signal
from typing import Any

import gymnasium as gym
from gymnasium.vector import AutoresetMode

from border_py.config import build, closest, require
from border_py.envs.async_vector import START_METHOD, in_worker
from border_py.errors import ConfigError, first_line
from border_py.processes.children import signals_ignored

__all__ = ["build_vector", "check_vector", "vector_spec"]

MODES = ("sync", "async", "vector_entry_point")  # gymnasium.make_vec's vectorization modes
MAKE_VEC_KEYS = ("vectorization_mode", "vector_kwargs")  # env.vector's keys without a _target_


def vector_spec(vector: Any, backend: str) -> dict[str, Any] | None:
    """Check ``env.vector`` (without importing anything); its spec with
    ``env.backend=vector`` (``{}`` for none given: ``gymnasium.make_vec``'s sync mode), else None.

    Raises:
        ConfigError: one line naming the bad key and what is allowed.
    """
    require("vector", vector is None or isinstance(vector, dict), "a mapping (or null)", vector)
    if backend != "vector":
        if vector:
            raise ConfigError(
                f"vector: used only with backend=vector (the backend is {backend}); remove it"
                " or set backend=vector"
            )
        return None
    spec = dict(vector or {})
    if "_target_" in spec:
        target = spec["_target_"]
        require(
            "vector._target_",
            isinstance(target, str) and bool(target),
            "a function or class of yours that returns a gymnasium VectorEnv, e.g."
            " my_pkg.envs.make_vector",
            target,
        )
        return spec
    unknown = sorted(set(spec) - set(MAKE_VEC_KEYS))
    if unknown:
        raise ConfigError(
            f"vector.{unknown[0]}: not a key of env.vector{closest(unknown[0], MAKE_VEC_KEYS)};"
            " without a _target_ it takes"
            f" {' and '.join(MAKE_VEC_KEYS)} (gymnasium.make_vec's), with one the keyword"
            " arguments of your _target_"
        )
    mode = spec.setdefault("vectorization_mode", "sync")
    require("vector.vectorization_mode", mode in MODES, f"one of {', '.join(MODES)}", mode)
    kwargs = spec.get("vector_kwargs")
    require("vector.vector_kwargs", kwargs is None or isinstance(kwargs, dict), "a mapping", kwargs)
    if mode == "vector_entry_point" and kwargs:
        raise ConfigError(
            "vector.vector_kwargs: vectorization_mode=vector_entry_point takes none (gymnasium"
            " passes env.kwargs to the env's vector entry point)"
        )
    return spec


def build_vector(
    spec: dict[str, Any],
    id: str,
    kwargs: dict[str, Any],
    wrappers: list[Any],
    num_envs: int,
) -> gym.vector.VectorEnv:
    """The user's VectorEnv (not yet checked: :func:`check_vector`), built with SIGINT ignored
    (subprocesses it starts inherit that: a Ctrl-C is the learner's to handle).

    Args:
        spec: ``env.vector`` as :func:`vector_spec` returned it.
        id: ``env.id`` (``gymnasium.make_vec``'s).
        kwargs: the env's keyword arguments (``gymnasium.make_vec``'s).
        wrappers: the actors' wrappers, each a callable of the env (``gymnasium.make_vec``'s).
        num_envs: envs.

    Raises:
        ConfigError: one line: the VectorEnv cannot be built (its error's first line).
    """
    with signals_ignored(signal.SIGINT):
        try:
            if "_target_" in spec:
                return build("env.vector", spec, num_envs=num_envs)
            mode = spec["vectorization_mode"]
            vector_kwargs = dict(spec.get("vector_kwargs") or {})
            if mode != "vector_entry_point":
                vector_kwargs.setdefault("autoreset_mode", AutoresetMode.SAME_STEP)
            if mode == "async":
                vector_kwargs.setdefault("context", START_METHOD)
                wrappers = [in_worker, *wrappers]
            return gym.make_vec(
                id,
                num_envs=num_envs,
                vectorization_mode=mode,
                vector_kwargs=vector_kwargs,
                wrappers=wrappers or None,
                **kwargs,
            )
        except ConfigError:
            raise
        except Exception as exc:  # the env's own error: bad kwargs, a missing dependency, ...
            raise ConfigError(
                f"env.vector: cannot build the VectorEnv ({first_line(exc)})"
            ) from None


def _mode(env: gym.vector.VectorEnv) -> AutoresetMode | None:
    """The autoreset mode ``env``'s metadata declares (None: none, or not a mode)."""
    declared = env.metadata.get("autoreset_mode")
    try:
        return AutoresetMode(declared)
    except (ValueError, TypeError):
        return None


def check_vector(
    env: Any, num_envs: int, spaces: tuple[gym.Space, gym.Space]
) -> gym.vector.VectorEnv:
    """``env`` if the actor can step it: a ``VectorEnv`` of ``num_envs`` envs that autoresets
    in ``SAME_STEP`` mode, whose single spaces are ``spaces`` (the evaluation env's); else it is
    closed and refused.

    Raises:
        ConfigError: one line saying what differs.
    """
    if not isinstance(env, gym.vector.VectorEnv):
        raise ConfigError(
            f"env.vector: built a {type(env).__name__}, not a gymnasium.vector.VectorEnv"
        )
    problem = None
    mode = _mode(env)
    if mode is not AutoresetMode.SAME_STEP:
        declared = env.metadata.get("autoreset_mode")
        problem = (
            f"{type(env).__name__} autoresets in mode {getattr(declared, 'value', declared)}"
            " (its metadata['autoreset_mode']); the actors need SameStep (the step that ends an"
            " episode returns the next one's first observation, the final one in"
            " info['final_obs']): build it with autoreset_mode=AutoresetMode.SAME_STEP"
        )
    elif env.num_envs != num_envs:
        problem = (
            f"{type(env).__name__} holds {env.num_envs} envs where the actor asked for"
            f" num_envs={num_envs} (actor_manager.n_envs_per_actor)"
        )
    elif (env.single_observation_space, env.single_action_space) != spaces:
        problem = (
            f"its single spaces (observations {env.single_observation_space}, actions"
            f" {env.single_action_space}) differ from the evaluation env's (observations"
            f" {spaces[0]}, actions {spaces[1]}); they must be equal"
        )
    if problem is not None:
        env.close()
        raise ConfigError(f"env.vector: {problem}")
    return env
