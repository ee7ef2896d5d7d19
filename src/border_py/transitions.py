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
from dataclasses import dataclass
from typing import Any

import numpy as np

from border_py.envs import VectorStep
from border_py.frames import FrameChunk

STORED = ("obs", "action", "reward", "next_obs", "discount")


@dataclass
class Transitions:
    """A batch of transitions as numpy arrays, the unit actors send and buffers store.

    Only the fields in ``STORED`` are stored as buffer columns; the others are metadata:

    - ``weight``: importance-sampling weights of a prioritized sample (float32, max 1), else None;
    - ``index``: the storage rows a prioritized sample drew (for the priority update), else None;
    - ``priority``: initial priorities (non-negative TD-error magnitudes) computed by the actor
      that sent the batch (``replay_buffer.priority_from_actors``), else None;
    - ``frames``: the new frames a batch of frame references needs (``replay_buffer.frame_stack``):
      ``obs`` and ``next_obs`` then hold the ids of the newest frame of each stack, not the stacks.
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_obs: np.ndarray
    discount: np.ndarray
    weight: np.ndarray | None = None
    index: np.ndarray | None = None
    priority: np.ndarray | None = None
    frames: FrameChunk | None = None

    def __len__(self) -> int:
        return len(self.reward)

    def arrays(self) -> dict[str, np.ndarray]:
        """Stored field name -> array."""
        return {name: getattr(self, name) for name in STORED}

    @staticmethod
    def concat(parts: list[Transitions]) -> Transitions:
        """One batch made of ``parts`` in order (their priorities and frames too; no sample
        metadata)."""
        out = Transitions(
            **{name: np.concatenate([getattr(p, name) for p in parts]) for name in STORED}
        )
        if all(p.priority is not None for p in parts):
            out.priority = np.concatenate([p.priority for p in parts])
        chunks = [p.frames for p in parts if p.frames is not None]
        if chunks:
            out.frames = FrameChunk.concat(chunks)
        return out


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
