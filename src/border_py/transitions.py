"""Transitions and the step processor that makes them, with n-step returns.

A transition is ``(obs, action, reward, next_obs, discount)`` where ``reward`` is the discounted
sum of up to ``n`` rewards and ``discount`` is what multiplies the bootstrap value of ``next_obs``:

    target = reward + discount * V(next_obs)

so ``discount = gamma**k`` after ``k`` steps (``k < n`` when the episode ended early by
truncation: the time limit is not a real end, the value of the final observation still counts)
and ``discount = 0`` when the episode terminated (nothing follows a true end).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from border_py.envs import VectorStep


@dataclass
class Transitions:
    """A batch of transitions as numpy arrays, the unit actors send and buffers store."""

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    discount: np.ndarray

    # Sampling metadata (never stored as columns): importance weights, storage rows and actors'
    # initial priorities of a prioritized sample; None otherwise.
    weight = None
    index = None
    priority = None

    def __len__(self) -> int:
        return len(self.reward)

    def arrays(self) -> dict[str, np.ndarray]:
        """Field name -> array."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @staticmethod
    def concat(parts: list[Transitions]) -> Transitions:
        """One batch made of ``parts`` in order."""
        return Transitions(
            **{
                f.name: np.concatenate([getattr(p, f.name) for p in parts])
                for f in fields(Transitions)
            }
        )


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
