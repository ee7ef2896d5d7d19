"""The step processor: vector-env steps in, n-step transitions out (see :mod:`border_py.transitions`).

Every env keeps a window of its last ``n`` (observation, action, reward) entries in one ring of
arrays shared by all envs (they all step together, so one clock indexes every env's window), and
each entry carries its discounted return so far: a step adds ``gamma^age * r`` to every entry of
its env (one vector operation for all envs). At each step, every env whose window is full emits its
oldest entry as a transition, ``R = sum_k gamma^k r_k`` over the window; an env whose episode ended
emits its whole window, shorter and shorter, with ``discount = 0`` after a termination and
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
        # age_powers[t][s]: gamma^age of the entry in slot s when the newest one is in slot t
        ages = (np.arange(n_step)[:, None] - np.arange(n_step)[None, :]) % n_step
        self.age_powers = self.powers[ages]
        self.count = np.zeros(n_envs, dtype=np.int64)  # pending entries per env
        self.clock = -1  # the time of the latest entry; its slot is clock % n_step
        self.full_from = n_step - 1  # from this clock on, every env's window is full (until an end)
        self._obs: np.ndarray | None = None  # (n_envs, n_step, *obs), allocated on first use
        self._action: np.ndarray | None = None
        self._reward = np.zeros((n_envs, n_step))  # each entry's own reward (for checkpoints)
        self._return = np.zeros((n_envs, n_step))  # each entry's discounted return so far

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
        n = self.n_step
        self.clock += 1
        slot = self.clock % n
        self._obs[:, slot] = obs
        self._action[:, slot] = action
        self._reward[:, slot] = step.reward
        self._return[:, slot] = 0.0  # a new entry (the slot's old one, if any, was emitted)
        self._return += step.reward[:, None] * self.age_powers[slot]
        oldest = (self.clock + 1) % n  # the oldest entry of a full window
        if self.clock >= self.full_from and not (step.terminated.any() or step.truncated.any()):
            # the steady state: every window is full, none ends, each emits its oldest entry (and
            # keeps n - 1: count stays as it is)
            return Transitions(
                obs=self._obs[:, oldest].copy(),
                action=self._action[:, oldest].copy(),
                reward=self._return[:, oldest].astype(np.float32),
                next_obs=step.next_obs,
                discount=np.full(self.n_envs, self.powers[-1], dtype=np.float32),
            )
        self.count += 1
        full = self.count == n
        ended = step.terminated | step.truncated
        if not ended.any():  # the common step: every env whose window is full emits one
            env = np.flatnonzero(full)
            if not len(env):
                return None
            self.count[env] -= 1
            return Transitions(
                obs=self._obs[env, oldest],
                action=self._action[env, oldest],
                reward=self._return[env, oldest].astype(np.float32),
                next_obs=step.next_obs[env],
                discount=np.full(len(env), self.powers[-1], dtype=np.float32),
            )
        # full windows (as above), then the whole pending window of each ended env, oldest first
        env_full = np.flatnonzero(full & ~ended)
        envs, slots = env_full.tolist(), [oldest] * len(env_full)
        lengths, terminal = [n] * len(env_full), [False] * len(env_full)
        for e in np.flatnonzero(ended).tolist():
            c, term = int(self.count[e]), bool(step.terminated[e])
            envs += [e] * c
            slots += [(self.clock - c + 1 + j) % n for j in range(c)]
            lengths += range(c, 0, -1)
            terminal += [term] * c
        self.count[env_full] -= 1
        self.count[ended] = 0
        self.full_from = max(self.full_from, self.clock + n)  # the ended envs' windows refill
        env, at = np.array(envs), np.array(slots)
        discount = np.where(terminal, 0.0, self.powers[lengths])
        return Transitions(
            obs=self._obs[env, at],
            action=self._action[env, at],
            reward=self._return[env, at].astype(np.float32),
            next_obs=step.next_obs[env],
            discount=discount.astype(np.float32),
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
        self.full_from = self.clock + self.n_step  # no entry pending: every window fills anew
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
                rewards_from_j = [later for _, _, later in window[j:]]
                self._return[e, s] = np.dot(rewards_from_j, self.powers[: c - j])
        self.full_from = self.clock + self.n_step - int(self.count.min())  # the last window fills
