"""The step processor: vector-env steps in, n-step transitions out (see :mod:`border_py.transitions`)."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from border_py.envs.vector import VectorStep
from border_py.transitions import Transitions


class NStepProcessor:
    """Turns vector-env steps into n-step transitions, one pending window per env.

    Args:
        n_envs: number of envs stepped together.
        n_step: steps summed per transition (1 = plain one-step TD).
        gamma: discount factor.
    """

    def __init__(self, n_envs: int, n_step: int, gamma: float) -> None:
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        self.n_step = n_step
        self.gamma = gamma
        self._pending: list[deque[tuple[np.ndarray, np.ndarray, float]]] = [
            deque() for _ in range(n_envs)
        ]

    def process(self, obs: np.ndarray, action: np.ndarray, step: VectorStep) -> Transitions | None:
        """Record that ``action`` was taken in ``obs`` and ``step`` followed; return ready transitions."""
        if self.n_step == 1:  # every step is a transition: no window, no per-env loop
            discount = np.where(step.terminated, 0.0, self.gamma).astype(np.float32)
            return Transitions(obs, action, step.reward, step.next_obs, discount)
        out: list[tuple[np.ndarray, np.ndarray, float, np.ndarray, float]] = []
        for i, window in enumerate(self._pending):
            window.append((obs[i], action[i], float(step.reward[i])))
            if step.terminated[i] or step.truncated[i]:
                end_discount = 0.0 if step.terminated[i] else 1.0
                while window:
                    out.append(self._emit(window, step.next_obs[i], end_discount))
                    window.popleft()
            elif len(window) == self.n_step:
                out.append(self._emit(window, step.next_obs[i], 1.0))
                window.popleft()
        if not out:
            return None
        o, a, r, no, d = zip(*out, strict=True)
        return Transitions(
            obs=np.stack(o),
            action=np.stack(a),
            reward=np.asarray(r, dtype=np.float32),
            next_obs=np.stack(no),
            discount=np.asarray(d, dtype=np.float32),
        )

    def state(self) -> list[list[tuple[list, Any, float]]]:
        """The pending windows as plain data (for checkpoints)."""
        return [
            [(np.asarray(o).tolist(), np.asarray(a).tolist(), r) for o, a, r in w]
            for w in self._pending
        ]

    def load_state(self, state: list[list[tuple[list, Any, float]]], obs_dtype: np.dtype) -> None:
        """Restore :meth:`state`."""
        self._pending = [
            deque((np.asarray(o, dtype=obs_dtype), np.asarray(a), float(r)) for o, a, r in w)
            for w in state
        ]

    def _emit(
        self, window: deque, next_obs: np.ndarray, end_discount: float
    ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, float]:
        """The transition starting at the window's head and bootstrapping from ``next_obs``."""
        ret = 0.0
        for k, (_, _, r) in enumerate(window):
            ret += self.gamma**k * r
        obs, action, _ = window[0]
        return obs, action, ret, next_obs, end_discount * self.gamma ** len(window)
