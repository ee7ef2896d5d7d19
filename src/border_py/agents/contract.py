"""Checking what an agent's ``act`` returns, once, at its first call.

An ``act`` that returns the wrong shape, dtype or an action outside the env's action space would
otherwise fail deep inside the env (or train on garbage). The sampler (actors, the serial trainer)
and the evaluator (``border eval`` and the trainers' evaluations) hand the first actions they get
to :func:`check_actions`, which raises :class:`AgentContractError`: one line naming the agent's
class, what it returned and what was expected. Later calls are not checked (no per-step cost).
"""

from __future__ import annotations

import traceback
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.errors import RunError

__all__ = ["AgentContractError", "check_actions", "failure_report"]


class AgentContractError(RunError):
    """An agent's ``act`` returned actions its env cannot take; the message is one line."""


def expected_actions(space: gym.Space, n: int) -> str:
    """What ``act`` must return for a batch of ``n`` observations of an env with ``space``."""
    if isinstance(space, gym.spaces.Discrete):
        return f"shape ({n},) integer actions in {space}"
    if isinstance(space, gym.spaces.Box):
        return f"shape {(n, *space.shape)} float actions in {space}"
    return f"{n} actions (one row per observation) in {space}"


def _problem(actions: Any, space: gym.Space, n: int) -> str | None:
    """What is wrong with ``actions`` for a batch of ``n`` observations (None: nothing)."""
    if not isinstance(actions, np.ndarray):
        return f"a {type(actions).__qualname__} (not a numpy array)"
    returned = f"shape {actions.shape} dtype {actions.dtype}"
    if isinstance(space, gym.spaces.Discrete):
        if actions.shape != (n,) or not np.issubdtype(actions.dtype, np.integer):
            return returned
        outside = (actions < space.start) | (actions >= space.start + space.n)
    elif isinstance(space, gym.spaces.Box):
        if actions.shape != (n, *space.shape) or not np.issubdtype(actions.dtype, np.floating):
            return returned
        inside = (actions >= space.low) & (actions <= space.high)  # NaN is outside
        outside = ~inside.reshape(n, -1).all(axis=1)
    else:
        if actions.ndim == 0 or len(actions) != n:
            return returned
        outside = np.asarray([not space.contains(row) for row in actions])
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        return f"action {actions[row].tolist()} (row {row}) outside {space}"
    return None


def check_actions(agent: Any, obs: np.ndarray, actions: Any, space: gym.Space) -> None:
    """Raise :class:`AgentContractError` if ``actions``, what ``agent.act(obs, ...)`` returned,
    are not one action of ``space`` per row of ``obs``.

    Raises:
        AgentContractError: one line, e.g. ``my_pkg.MyAgent.act returned shape (4,) dtype
            float64 for a batch of 4 observations; expected shape (4,) integer actions in
            Discrete(2)``.
    """
    n = len(obs)
    problem = _problem(actions, space, n)
    if problem is not None:
        agent_class = type(agent)
        raise AgentContractError(
            f"{agent_class.__module__}.{agent_class.__qualname__}.act returned {problem} for a"
            f" batch of {n} observation{'' if n == 1 else 's'}; expected"
            f" {expected_actions(space, n)}"
        )


def failure_report(exc: BaseException) -> str:
    """What a worker process (an actor, the evaluator) reports of the exception it ends with:
    an :class:`AgentContractError` as its one line (where ``act`` was called says nothing about
    why), any other with its traceback."""
    if isinstance(exc, AgentContractError):
        return f"{type(exc).__name__}: {exc}"
    return "".join(traceback.format_exception(exc))
