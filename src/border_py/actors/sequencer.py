"""The sequence builder: vector-env steps in, R2D2 sequences out (see :mod:`border_py.sequences`).

Steps are recorded one by one (:meth:`SequenceBuilder.add`, a few list appends) as rows of every
env together, with the recurrent state each env acted with; windows are cut a block at a time
(:meth:`SequenceBuilder.take`), as :class:`~border_py.actors.nstep.NStepProcessor` takes its
transitions.

Each env's episode has a window at every episode step ``s = 0, period, 2 * period, ...`` before
its end: the window stores episode steps ``s - B .. s + L + N - 1`` (``B`` burn-in, ``L``
learning steps, ``N`` the n-step tail). It is ready when the step at its last index was taken,
or when the episode ended (the indices past the final observation padded). ``period <= L``
makes every step of an episode a learning step of a window (the one starting at the multiple
of ``period`` at or below it).

Each window is named by its key ``(stream, episode, s)`` (``Sequences.key``): ``stream`` the
builder's ``stream`` plus the env's index, ``episode`` the env's episode count (from 0, kept by
checkpoints), ``s`` as above. Keys of one env only grow, so a ring of steps
(:mod:`border_py.replay.sequence_store`) stores the steps two windows of an episode share once; a
builder started afresh under a stream of an earlier one starts again at ``(0, 0)``, which the
ring takes for a new stream.

A window's ``state`` is the one :meth:`~SequenceBuilder.add` was given with its first present
index: the state that env acted with there, before the step (the actor resets it to zeros at
every episode start, so a window from an episode's first step stores zeros). A take keeps only
the rows a pending window still reaches (``B + L + N`` steps at most) and
:meth:`~SequenceBuilder.state` saves them for a checkpoint as plain data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.envs.vector import VectorStep
from border_py.sequences import Sequences

__all__ = ["SequenceBuilder"]

NO_END = np.iinfo(np.int64).max  # the length of an episode that has not ended


class SequenceBuilder:
    """Cuts overlapping fixed-size windows out of each env's episodes, one pending stream per env.

    A take's sequences come out ordered by the step that made them ready (windows completed by
    the step before windows closed by an episode's end, each by env).

    Args:
        n_envs: envs stepped together.
        burn_in: ``B``: stored steps before the learning steps (fewer at an episode's start).
        length: ``L``: learning steps per sequence.
        period: episode steps between the starts of consecutive windows (``1 <= period <= L``).
        n_step: ``N``: rewards summed per target (the stored tail past the learning steps).
        gamma: discount factor.
        state_shape: the recurrent state of one env, ``(k, hidden)``.
        stream: the key's stream of env 0 (env ``i``: ``stream + i``); unique among the builders
            that feed one replay buffer (:class:`~border_py.actors.sampler.Sampler`: its seed
            times its envs).

    Raises:
        ValueError: a setting out of range.
    """

    def __init__(
        self,
        n_envs: int,
        burn_in: int,
        length: int,
        period: int,
        n_step: int,
        gamma: float,
        state_shape: tuple[int, ...],
        stream: int = 0,
    ) -> None:
        if n_envs < 1 or burn_in < 0 or length < 1 or n_step < 1:
            raise ValueError(
                f"need n_envs >= 1, burn_in >= 0, length >= 1, n_step >= 1; got {n_envs},"
                f" {burn_in}, {length}, {n_step}"
            )
        if not 1 <= period <= length:
            raise ValueError(f"period must be in [1, length={length}], got {period}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.n_envs, self.burn_in, self.length, self.period = n_envs, burn_in, length, period
        self.n_step, self.gamma = n_step, gamma
        self.state_shape = tuple(state_shape)
        self.stream = stream
        self.steps = burn_in + length + n_step  # T: stored steps per sequence
        self.powers = gamma ** np.arange(n_step + 1)  # gamma^0 .. gamma^N
        # one entry per row (a step of every env), oldest first; row numbers start at _base
        self._obs: list[np.ndarray] = []
        self._action: list[np.ndarray] = []
        self._reward: list[np.ndarray] = []
        self._state: list[np.ndarray] = []
        self._base = 0
        self._start = np.zeros(n_envs, dtype=np.int64)  # the row of each episode's first step
        self._next = np.zeros(n_envs, dtype=np.int64)  # the episode step of each next window
        self._episode = np.zeros(n_envs, dtype=np.int64)  # each env's episodes ended so far
        # windows ready since the last take:
        # (env, s, first row, episode length or NO_END, terminated, episode)
        self._ready: list[tuple[int, int, int, int, bool, int]] = []
        self._final: dict[tuple[int, int], np.ndarray] = {}  # (row, env) -> final observation

    def add(self, obs: np.ndarray, state: np.ndarray, action: np.ndarray, step: VectorStep) -> None:
        """Record that each env, in ``obs`` with recurrent ``state`` (the state it acted with:
        before this step), took ``action`` and ``step`` followed (arrays the caller does not
        write to afterwards; the action and state are copied).

        Raises:
            ValueError: ``state`` is not ``(n_envs, *state_shape)``.
        """
        state = np.array(state, dtype=np.float32)
        if state.shape != (self.n_envs, *self.state_shape):
            raise ValueError(
                f"recurrent state of shape {state.shape}, expected {(self.n_envs, *self.state_shape)}"
            )
        row = self._base + len(self._obs)
        self._obs.append(obs)
        self._action.append(np.array(action, dtype=np.int64))
        self._reward.append(step.reward)
        self._state.append(state)
        taken = row - self._start + 1  # steps taken in each env's episode, this one included
        complete = self._next + self.length + self.n_step <= taken
        if complete.any():
            for env in np.flatnonzero(complete):
                self._ready.append(
                    (
                        int(env),
                        int(self._next[env]),
                        int(self._start[env]),
                        NO_END,
                        False,
                        int(self._episode[env]),
                    )
                )
                self._next[env] += self.period
        done = step.terminated | step.truncated
        if done.any():
            self._close(row, taken, step, np.flatnonzero(done))

    def _close(self, row: int, taken: np.ndarray, step: VectorStep, ended: np.ndarray) -> None:
        """The episodes of envs ``ended`` ended at ``row``: their remaining windows are ready."""
        for env in ended:
            end, terminated = int(taken[env]), bool(step.terminated[env])
            episode = int(self._episode[env])
            self._final[(row, int(env))] = step.next_obs[env]
            for s in range(int(self._next[env]), end, self.period):
                self._ready.append((int(env), s, int(self._start[env]), end, terminated, episode))
            self._start[env], self._next[env] = row + 1, 0
            self._episode[env] += 1

    def take(self) -> Sequences | None:
        """The sequences made ready by the steps added since the last take (None if none)."""
        if not self._ready:
            return None
        env, s, start, end, term, episode = (np.array(c) for c in zip(*self._ready, strict=True))
        B, T = self.burn_in, self.steps
        rows = len(self._obs)
        u = s[:, None] - B + np.arange(T)  # the episode step of each stored index
        acted = (u >= 0) & (u < end[:, None])
        final = u == end[:, None]
        at = np.clip(start[:, None] + u - self._base, 0, rows - 1), env[:, None]
        obs = np.stack(self._obs)[at]  # (windows, T, *obs_shape)
        obs[~acted] = 0
        for w, t in zip(*np.nonzero(final), strict=True):
            obs[w, t] = self._final[(int(start[w] + end[w] - 1), int(env[w]))]
        actions, rewards = np.stack(self._action), np.stack(self._reward)
        action = np.where(acted, actions[at], 0)
        reward = np.where(acted, rewards[at], 0.0).astype(np.float32)
        first = np.maximum(s - B, 0)  # the episode step of the first present index
        before = np.clip(start + first - 1 - self._base, 0, rows - 1), env
        at_first = zip(start + first - self._base, env, strict=True)
        ret, discount, offset, mask = self._targets(s, end, term, reward)
        out = Sequences(
            obs=obs,
            action=action,
            reward=reward,
            present=acted | final,
            state=np.stack([self._state[r][e] for r, e in at_first]),
            burn=np.minimum(s, B),
            first_prev_action=np.where(first > 0, actions[before], -1),
            first_prev_reward=np.where(first > 0, rewards[before], 0.0).astype(np.float32),
            ret=ret,
            discount=discount,
            offset=offset,
            mask=mask,
            burn_in=B,
            key=np.stack([self.stream + env, episode, s], axis=1).astype(np.int64),
        )
        self._ready, self._final = [], {}
        self._forget_rows()
        return out

    def _targets(
        self, s: np.ndarray, end: np.ndarray, term: np.ndarray, reward: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``ret``, ``discount``, ``offset`` and ``mask`` of the learning indices of windows
        starting at episode steps ``s`` of episodes of length ``end`` (``term``: terminated)."""
        B, L, N = self.burn_in, self.length, self.n_step
        u = s[:, None] + np.arange(L)  # the episode step of each learning index
        mask = u < end[:, None]
        m = np.where(mask, np.minimum(N, end[:, None] - u), 0)  # rewards summed
        window = B + np.arange(L)[:, None] + np.arange(N)  # (L, N): indices t + k
        summed = np.arange(N) < m[..., None]
        # rewards past a target's m are left out, not multiplied by 0 (inf * 0 is nan)
        ret = np.where(summed, reward[:, window], 0.0) @ self.powers[:N]
        stops = term[:, None] & (u + m == end[:, None])  # the episode terminated within m steps
        discount = np.where(mask & ~stops, self.powers[m], 0.0)
        return ret.astype(np.float32), discount.astype(np.float32), m.astype(np.int64), mask

    def _forget_rows(self) -> None:
        """Drop the rows no pending window reaches (its first present index, and the step
        before it for the previous action and reward)."""
        first = self._start + np.maximum(self._next - self.burn_in, 0)
        need = int(np.min(first - (self._next > self.burn_in)))
        drop = min(max(need - self._base, 0), len(self._obs))
        del self._obs[:drop], self._action[:drop], self._reward[:drop], self._state[:drop]
        self._base += drop

    def state(self) -> dict[str, Any]:
        """The pending windows as plain data (ints, lists, bytes: what a checkpoint's
        ``torch.load(weights_only=True)`` reads back), for checkpoints.

        Raises:
            RuntimeError: sequences are ready and not taken.
        """
        if self._ready:
            raise RuntimeError("take() the ready sequences before saving the sequence windows")
        settings = [self.burn_in, self.length, self.period, self.n_step, self.gamma]
        rows = {"obs": self._obs, "action": self._action, "reward": self._reward}
        rows["state"] = self._state
        return {
            "settings": settings,
            "start": (self._start - self._base).tolist(),
            "next": self._next.tolist(),
            "episode": self._episode.tolist(),
            "rows": {k: _pack(np.stack(v)) if v else None for k, v in rows.items()},
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`state` (ready sequences not taken are dropped; a state saved
        without episode counts, before keys were cut, counts from 0).

        Raises:
            ValueError: ``saved`` was taken with other settings, envs or state shape, or its
                rows do not fit them.
        """
        settings = [self.burn_in, self.length, self.period, self.n_step, self.gamma]
        if list(saved["settings"]) != settings or len(saved["start"]) != self.n_envs:
            raise ValueError(
                f"the checkpoint's sequence windows were cut with (burn_in, length, period, n_step,"
                f" gamma) = {tuple(saved['settings'])} and {len(saved['start'])} envs, not"
                f" {tuple(settings)} and {self.n_envs}"
            )
        rows = _unpack_rows(saved["rows"], self.n_envs, self.state_shape)
        self._obs, self._action, self._reward = rows["obs"], rows["action"], rows["reward"]
        self._state, self._base = rows["state"], 0
        self._start = np.array(saved["start"], dtype=np.int64)
        self._next = np.array(saved["next"], dtype=np.int64)
        self._episode = np.array(saved.get("episode", [0] * self.n_envs), dtype=np.int64)
        self._ready, self._final = [], {}


def _pack(array: np.ndarray) -> dict[str, Any]:
    """``array`` as plain data: its dtype, shape and bytes."""
    array = np.ascontiguousarray(array)
    return {"dtype": array.dtype.str, "shape": list(array.shape), "data": array.tobytes()}


def _unpack(packed: dict[str, Any]) -> np.ndarray:
    """The array :func:`_pack` packed (read-only), numeric dtypes only.

    Raises:
        ValueError: a dtype that is not bool, int, uint or float, or bytes that do not fit.
    """
    try:
        dtype = np.dtype(packed["dtype"])
    except TypeError:
        dtype = np.dtype(object)  # not a dtype numpy knows: refused below
    shape = [int(n) for n in packed["shape"]]
    if dtype.kind not in "biuf" or min(shape, default=0) < 0:
        raise ValueError(
            f"a saved array of dtype {packed['dtype']!r} and shape {shape}: only numeric arrays"
            " are restored"
        )
    return np.frombuffer(packed["data"], dtype=dtype).reshape(shape)


def _unpack_rows(
    saved: dict[str, Any], n_envs: int, state_shape: tuple[int, ...]
) -> dict[str, list[np.ndarray]]:
    """The rows :meth:`SequenceBuilder.state` saved, one array per row and column, checked:
    every column as many rows of ``n_envs`` entries, one action and reward per env, states of
    ``state_shape``.

    Raises:
        ValueError: they do not fit.
    """
    names = ("obs", "action", "reward", "state")
    if all(saved.get(name) is None for name in names):
        return {name: [] for name in names}
    arrays = {name: _unpack(saved[name]) for name in names}
    heads = {a.shape[:2] for a in arrays.values()}
    tails = [arrays[name].shape[2:] for name in ("action", "reward", "state")]
    if len(heads) != 1 or heads.pop()[1:] != (n_envs,) or tails != [(), (), state_shape]:
        shapes = {name: a.shape for name, a in arrays.items()}
        raise ValueError(
            f"the checkpoint's sequence rows {shapes} do not fit {n_envs} envs with recurrent"
            f" states {state_shape}"
        )
    return {name: list(a) for name, a in arrays.items()}
