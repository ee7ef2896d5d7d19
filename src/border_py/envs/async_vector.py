"""``env.backend=gymnasium_async``: each env in its own subprocess (gymnasium's
``AsyncVectorEnv``), so that a slow simulator's steps overlap instead of running one after another.

The subprocesses are started with ``spawn`` (never the global start method), with SIGINT ignored
(a Ctrl-C is the learner's to handle: the actor's staged stop closes them), and die with the
thread that started them (Linux's parent-death signal): an actor killed with SIGKILL leaves none
behind. ``AsyncVectorEnv`` runs in its ``SAME_STEP`` autoreset mode and is stepped as any such
vector env is (:class:`~border_py.envs.gym_vector.GymVector`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

from border_py.envs.gym_vector import GymVector
from border_py.processes.children import die_with_parent, signals_ignored

__all__ = ["START_METHOD", "AsyncVector", "in_worker"]

START_METHOD = "spawn"
CLOSE_TIMEOUT = 10.0  # seconds close() waits for the subprocesses before terminating them


def _detach() -> None:
    """Make this (env) subprocess ignore SIGINT and die with its parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


def in_worker(env: gym.Env) -> gym.Env:
    """``env``, unchanged, once its subprocess ignores SIGINT and dies with its parent: a
    "wrapper" for ``gymnasium.make_vec``'s async mode, which calls it in the subprocess."""
    _detach()
    return env


class _InWorker:
    """An env builder that first makes its subprocess ignore SIGINT and die with its parent.

    Args:
        make: builds the env (in the subprocess).
    """

    def __init__(self, make: Callable[[], gym.Env]) -> None:
        self.make = make

    def __call__(self) -> gym.Env:
        _detach()
        return self.make()


class AsyncVector(GymVector):
    """``n_envs`` envs stepped in subprocesses, with the :class:`VectorEnv` contract.

    Args:
        make: builds one env (called in each subprocess; it must pickle).
        n_envs: envs (subprocesses).
        seed: env ``i``'s first reset is seeded with ``seed + i``, as :class:`VectorEnv` does.
    """

    backend = "gymnasium_async"

    def __init__(self, make: Callable[[], gym.Env], n_envs: int, seed: int) -> None:
        with signals_ignored(signal.SIGINT):  # the subprocesses inherit it from their start on
            env = AsyncVectorEnv(
                [_InWorker(make) for _ in range(n_envs)],
                context=START_METHOD,
                autoreset_mode=AutoresetMode.SAME_STEP,
            )
        self._subprocesses = env
        super().__init__(env, seed)

    def _close(self) -> None:
        """Close the subprocesses, terminating those that do not finish within
        :data:`CLOSE_TIMEOUT`."""
        self._subprocesses.close(timeout=CLOSE_TIMEOUT)
