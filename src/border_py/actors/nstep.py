"""The step processor: vector-env steps in, n-step transitions out (see :mod:`border_py.transitions`).

Steps are recorded one by one (:meth:`NStepProcessor.add`, a few list appends) and turned into
transitions a block at a time (:meth:`NStepProcessor.take`): an actor takes once per batch it sends,
so the numpy work of the windows is paid once per batch, not once per env step (far less per
transition on a cheap env: ``benchmarks/async_throughput.py``, docs/04-scaling/performance.md).

A take lays the block out as ``rows x envs`` arrays, the ``n - 1`` rows kept from the previous
take on top. The transition that starts in row ``s`` of env ``e`` sums the rewards of rows
``s, s+1, ...`` until its env's episode ends (that row included) or ``n`` rows are summed,
``R = sum_k gamma^k r_(s+k)``; it bootstraps from the ``next_obs`` of its last row with
``discount = 0`` after a termination and ``gamma**k`` otherwise (``k`` rows summed: a truncation
still bootstraps from the final observation). A window that reaches the block's last row with
neither an end nor ``n`` rows waits for the next take.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.envs.vector import VectorStep
from border_py.transitions import Transitions

__all__ = ["NStepProcessor"]


class NStepProcessor:
    """Turns vector-env steps into n-step transitions, one pending window per env.

    A take's transitions come out ordered by the step they start in, then by env.

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
        self.kept = n_step - 1  # rows kept between takes: a window's entries not yet emitted
        self.pending = np.zeros(n_envs, dtype=np.int64)  # pending entries: the last rows kept
        self._no_end = np.zeros(n_envs, dtype=bool)
        # one list entry per row: the kept rows, then the steps added since the last take
        self._obs: list[np.ndarray] = []
        self._action: list[np.ndarray] = []
        self._reward: list[np.ndarray] = []
        self._terminated: list[np.ndarray] = []
        self._truncated: list[np.ndarray] = []
        # the added steps' next observations only (a kept row never ends a window)
        self._next_obs: list[np.ndarray] = []

    def add(self, obs: np.ndarray, action: np.ndarray, step: VectorStep) -> None:
        """Record that ``action`` was taken in ``obs`` and ``step`` followed (arrays the caller
        does not write to afterwards; the action is copied, an agent may reuse its buffer)."""
        if not self._obs and self.kept:  # the first step: empty kept rows of the right shapes
            self._keep_empty_rows(obs, np.asarray(action))
        self._obs.append(obs)
        self._action.append(np.array(action))
        self._reward.append(step.reward)
        self._terminated.append(step.terminated)
        self._truncated.append(step.truncated)
        self._next_obs.append(step.next_obs)

    def _keep_empty_rows(self, obs: np.ndarray, action: np.ndarray) -> None:
        k = self.kept
        self._obs = [np.zeros_like(obs)] * k
        self._action = [np.zeros_like(action)] * k
        self._reward = [np.zeros(self.n_envs, dtype=np.float32)] * k
        self._terminated, self._truncated = [self._no_end] * k, [self._no_end] * k

    def take(self) -> Transitions | None:
        """The transitions finished by the steps added since the last take (None if none)."""
        if not self._next_obs:
            return None
        n, kept, rows = self.n_step, self.kept, len(self._obs)
        if not kept:  # one-step transitions: every env's step is one (a sampler's step() per step)
            return self._one_step()
        if rows == n and self.pending.min() == kept:  # one step after full windows (step())
            step_ended = self._terminated[-1] | self._truncated[-1]
            if not step_ended.any():
                return self._slide()
        reward, terminated = np.array(self._reward), np.array(self._terminated)
        done = terminated | np.array(self._truncated)
        row = np.arange(rows)[:, None]
        # the first end at or after each row (rows + n: none in the block), then the window's
        # last row: that end, or the n-th row, whichever comes first
        next_end = np.minimum.accumulate(np.where(done, row, rows + n)[::-1])[::-1]
        last = np.minimum(next_end, row + n - 1)
        valid = row >= kept - self.pending  # a kept row is valid while its entry is pending
        emit = valid & (last < rows)
        start, env = np.nonzero(emit)
        transitions = None
        if len(start):
            end = last[start, env]
            summed = end - start + 1
            window = np.minimum(start[:, None] + np.arange(n), rows - 1)
            in_window = np.arange(n) < summed[:, None]
            # rewards outside a window are left out, not multiplied by 0 (inf * 0 is nan)
            ret = np.where(in_window, reward[window, env[:, None]], 0.0) @ self.powers[:n]
            discount = np.where(terminated[end, env], 0.0, self.powers[summed])
            transitions = Transitions(
                obs=np.array(self._obs)[start, env],
                action=np.array(self._action)[start, env],
                reward=ret.astype(np.float32),
                next_obs=np.array(self._next_obs)[end - kept, env],
                discount=discount.astype(np.float32),
            )
        self.pending = (valid & ~emit)[rows - kept :].sum(axis=0)
        self._obs, self._action = self._obs[rows - kept :], self._action[rows - kept :]
        self._reward = self._reward[rows - kept :]
        # a pending entry never ended (and rows before it are past every window that is open)
        self._terminated, self._truncated = [self._no_end] * kept, [self._no_end] * kept
        self._next_obs = []
        return transitions

    def _slide(self) -> Transitions:
        """Every env's window full and none ended: each emits its oldest entry (row 0)."""
        rewards = np.array(self._reward)
        transitions = Transitions(
            obs=self._obs[0].copy(),
            action=self._action[0].copy(),
            reward=(self.powers[: self.n_step] @ rewards).astype(np.float32),
            next_obs=self._next_obs[0],
            discount=np.full(self.n_envs, self.powers[-1], dtype=np.float32),
        )
        self._obs, self._action, self._reward = self._obs[1:], self._action[1:], self._reward[1:]
        self._terminated, self._truncated = self._terminated[1:], self._truncated[1:]
        self._next_obs = []
        return transitions

    def _one_step(self) -> Transitions:
        discount = np.where(np.concatenate(self._terminated), 0.0, self.gamma)
        transitions = Transitions(
            obs=np.concatenate(self._obs),
            action=np.concatenate(self._action),
            reward=np.concatenate(self._reward),
            next_obs=np.concatenate(self._next_obs),
            discount=discount.astype(np.float32),
        )
        self._obs, self._action, self._reward = [], [], []
        self._terminated, self._truncated, self._next_obs = [], [], []
        return transitions

    def state(self) -> list[list[tuple[list, Any, float]]]:
        """The pending windows as plain data, each env's oldest entry first (for checkpoints).

        Raises:
            RuntimeError: steps were added since the last take.
        """
        if self._next_obs:
            raise RuntimeError("take() the added steps before saving the n-step windows")
        windows = []
        for e in range(self.n_envs):
            first = len(self._obs) - int(self.pending[e])
            windows.append(
                [
                    (
                        self._obs[r][e].tolist(),
                        np.asarray(self._action[r][e]).tolist(),
                        float(self._reward[r][e]),
                    )
                    for r in range(first, len(self._obs))
                ]
            )
        return windows

    def load_state(
        self,
        state: list[list[tuple[list, Any, float]]],
        obs_dtype: np.dtype,
        action_dtype: np.dtype,
    ) -> None:
        """Restore :meth:`state` (steps added and not taken are dropped); the dtypes are those of
        the observations and actions :meth:`add` takes.

        Raises:
            ValueError: a window longer than ``n_step - 1`` entries (saved with a larger n_step).
        """
        kept = self.kept
        if any(len(window) > kept for window in state):
            raise ValueError(
                f"the checkpoint's n-step windows hold up to {max(map(len, state))} entries, more"
                f" than n_step={self.n_step} keeps: was it saved with another agent.n_step?"
            )
        self.pending[:] = [len(window) for window in state]
        self._obs, self._action, self._reward = [], [], []
        self._terminated, self._truncated, self._next_obs = [], [], []
        entries = [entry for window in state for entry in window]
        if not entries:  # the next add lays out empty rows
            return
        first_obs, first_action, _ = entries[0]
        obs = np.zeros((kept, self.n_envs, *np.shape(first_obs)), dtype=obs_dtype)
        action = np.zeros((kept, self.n_envs, *np.shape(first_action)), dtype=action_dtype)
        reward = np.zeros((kept, self.n_envs), dtype=np.float32)
        for e, window in enumerate(state):
            for j, (o, a, r) in enumerate(window):
                row = kept - len(window) + j
                obs[row, e], action[row, e], reward[row, e] = o, a, r
        self._obs, self._action, self._reward = list(obs), list(action), list(reward)
        self._terminated, self._truncated = [self._no_end] * kept, [self._no_end] * kept
