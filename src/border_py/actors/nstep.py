"""The step processor: vector-env steps in, n-step transitions out (see :mod:`border_py.transitions`).

Every env keeps a window of its last ``n`` (observation, action, reward) entries in one ring of
arrays shared by all envs (they all step together, so one clock indexes every env's window). At
each step, every env whose window is full emits one transition, ``R = sum_k gamma^k r_k`` over
the window, computed for all those envs in one matrix product; an env whose episode ended emits
its whole window, shorter and shorter, with ``discount = 0`` after a termination and
``gamma**k`` after a truncation (the final observation still bootstraps).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.envs.vector import VectorStep
from border_py.transitions import Transitions


class NStepProcessor:
    """Turns vector-env steps into n-step transitions, one pending window per env.

    A step's transitions come out as: the full windows (in env order), then the pending windows
    of the envs whose episodes ended (in env order, each oldest first).

    Args:
        n_envs: number of envs stepped together.
        n_step: steps summed per transition (1 = plain one-step TD).
        gamma: discount factor.
    """

    def __init__(self, n_envs: int, n_step: int, gamma: float) -> None:
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        self.n_envs, self.n_step, self.gamma = n_envs, n_step, gamma
        self.powers = gamma ** np.arange(n_step + 1)  # gamma^0 .. gamma^n
        self.count = np.zeros(n_envs, dtype=np.int64)  # pending entries per env
        self.clock = -1  # the time of the latest entry; its slot is clock % n_step
        self._obs: np.ndarray | None = None  # (n_envs, n_step, *obs), allocated on first use
        self._action: np.ndarray | None = None
        self._reward = np.zeros((n_envs, n_step))

    def _allocate(self, obs: np.ndarray, action: np.ndarray) -> None:
        n, k = self.n_envs, self.n_step
        self._obs = np.zeros((n, k, *obs.shape[1:]), dtype=obs.dtype)
        self._action = np.zeros((n, k, *action.shape[1:]), dtype=action.dtype)

    def process(self, obs: np.ndarray, action: np.ndarray, step: VectorStep) -> Transitions | None:
        """Record that ``action`` was taken in ``obs`` and ``step`` followed; return ready transitions."""
        if self.n_step == 1:  # every step is a transition: no window
            discount = np.where(step.terminated, 0.0, self.gamma).astype(np.float32)
            return Transitions(obs, action, step.reward, step.next_obs, discount)
        if self._obs is None:
            self._allocate(obs, action)
        assert self._obs is not None and self._action is not None
        self.clock += 1
        slot = self.clock % self.n_step
        self._obs[:, slot] = obs
        self._action[:, slot] = action
        self._reward[:, slot] = step.reward
        self.count += 1
        ended = step.terminated | step.truncated
        if not ended.any():  # the common step: every env whose window is full emits one
            env = np.flatnonzero(self.count == self.n_step)
            if not len(env):
                return None
            self.count[env] -= 1
            first = (self.clock + 1) % self.n_step  # the oldest entry of a full window
            window = (first + np.arange(self.n_step)) % self.n_step
            return Transitions(
                obs=self._obs[env, first],
                action=self._action[env, first],
                reward=(self._reward[env][:, window] @ self.powers[:-1]).astype(np.float32),
                next_obs=step.next_obs[env],
                discount=np.full(len(env), self.powers[-1], dtype=np.float32),
            )
        # full windows (as above), then the whole pending window of each ended env, oldest first
        full = np.flatnonzero(~ended & (self.count == self.n_step))
        done = np.flatnonzero(ended)
        c = self.count[done]
        j = np.arange(c.sum()) - np.repeat(np.cumsum(c) - c, c)  # 0.. c_e - 1 within each env
        env = np.concatenate([full, np.repeat(done, c)])
        start = np.concatenate(
            [np.full(len(full), self.clock - self.n_step + 1), np.repeat(self.clock - c + 1, c) + j]
        )
        length = np.concatenate([np.full(len(full), self.n_step), np.repeat(c, c) - j])
        end = np.concatenate(
            [np.ones(len(full)), np.repeat(np.where(step.terminated[done], 0.0, 1.0), c)]
        )
        self.count[full] -= 1
        self.count[done] = 0
        offsets = np.arange(self.n_step)
        times = (start[:, None] + offsets[None, :]) % self.n_step  # (m, n) slots of each window
        rewards = self._reward[env[:, None], times] * (offsets[None, :] < length[:, None])
        oldest = start % self.n_step
        return Transitions(
            obs=self._obs[env, oldest],
            action=self._action[env, oldest],
            reward=(rewards @ self.powers[:-1]).astype(np.float32),
            next_obs=step.next_obs[env],
            discount=(end * self.powers[length]).astype(np.float32),
        )

    def state(self) -> list[list[tuple[list, Any, float]]]:
        """The pending windows as plain data, each env's oldest entry first (for checkpoints)."""
        obs, action = self._obs, self._action
        if obs is None or action is None:
            return [[] for _ in range(self.n_envs)]
        windows = []
        for e in range(self.n_envs):
            c = int(self.count[e])
            slots = [(self.clock - c + 1 + j) % self.n_step for j in range(c)]
            windows.append(
                [
                    (
                        obs[e, s].tolist(),
                        np.asarray(action[e, s]).tolist(),
                        float(self._reward[e, s]),
                    )
                    for s in slots
                ]
            )
        return windows

    def load_state(self, state: list[list[tuple[list, Any, float]]], obs_dtype: np.dtype) -> None:
        """Restore :meth:`state`."""
        self.clock = self.n_step - 1
        self.count[:] = 0
        entries = [
            (e, j, entry) for e, window in enumerate(state) for j, entry in enumerate(window)
        ]
        if not entries:
            return
        _, _, (o, a, _) = entries[0]
        self._allocate(np.asarray([o], dtype=obs_dtype), np.asarray([a]))
        assert self._obs is not None and self._action is not None
        for e, window in enumerate(state):
            c = len(window)
            self.count[e] = c
            for j, (o, a, r) in enumerate(window):
                s = (self.clock - c + 1 + j) % self.n_step
                self._obs[e, s] = np.asarray(o, dtype=obs_dtype)
                self._action[e, s] = np.asarray(a)
                self._reward[e, s] = r
