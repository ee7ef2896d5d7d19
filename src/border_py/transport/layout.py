"""What one shared-memory slot of an actor's channel holds: named arrays, each sized for the
largest batch an actor of the run can emit, of transitions or of a recurrent agent's sequences
(:mod:`border_py.sequences`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

__all__ = ["ALIGN", "BatchLayout", "Column", "SequenceShape"]

ALIGN = 64  # bytes: every array of a slot starts on a cache line


@dataclass(frozen=True)
class Column:
    """One array of a slot: ``rows`` entries of ``shape`` and ``dtype`` each."""

    name: str
    rows: int
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        """Bytes of the array, padded to :data:`ALIGN`."""
        size = self.rows * math.prod(self.shape) * np.dtype(self.dtype).itemsize
        return -(-size // ALIGN) * ALIGN


@dataclass(frozen=True)
class SequenceShape:
    """The sequences a recurrent agent's actors cut (:class:`~border_py.sequences.Sequences`).

    Attributes:
        burn_in: ``B``, stored steps before the learning steps.
        length: ``L``, learning steps.
        period: env steps between the starts of an episode's sequences (``1 <= period <= L``).
        n_step: ``N``, the bootstrap tail.
        state: the shape of one env's recurrent state, ``(k, hidden)``.
    """

    burn_in: int
    length: int
    period: int
    n_step: int
    state: tuple[int, ...]

    @property
    def steps(self) -> int:
        """``T = B + L + N``: stored steps per sequence."""
        return self.burn_in + self.length + self.n_step

    @property
    def per_env_step(self) -> int:
        """The most sequences one env's step can finish: the window whose tail it completes,
        and, when it ends the episode, every window still open, whose starts are ``period``
        apart among the last ``L + N`` steps."""
        return 1 + -(-(self.length + self.n_step) // self.period)


@dataclass(frozen=True)
class BatchLayout:
    """The arrays of one slot, sized for the largest batch an actor can emit.

    An actor sends once it holds ``n_buffer`` transitions; the block of steps that gets it there
    (one step per missing transition and env, :meth:`~border_py.actors.sampler.Sampler.sample`) may
    add up to ``n_envs * n_step - 1`` more (the pending n-step windows, and envs ending at once
    flush theirs). With frame storage, each env step registers at most two frames per env (the
    next frame, and the first of a new episode). A recurrent agent's actor steps one vector step
    at a time until it holds ``n_buffer`` sequences: the last step may add
    ``n_envs * per_env_step - 1`` more (:class:`SequenceShape`).

    Attributes:
        columns: the slot's arrays, in order.
        burn_in: None for transitions; the sequences' burn-in for sequences (the one field of
            :class:`~border_py.sequences.Sequences` that is not an array).
    """

    columns: tuple[Column, ...]
    burn_in: int | None = None

    @classmethod
    def for_batches(
        cls,
        observation_space: gym.Space,
        action_space: gym.Space,
        n_buffer: int,
        n_envs: int,
        n_step: int,
        frame_stack: int | None = None,
        priorities: bool = False,
    ) -> BatchLayout:
        """The layout for batches of ``n_buffer`` transitions from ``n_envs`` envs."""
        rows = n_buffer + n_envs * n_step
        steps = -(-rows // n_envs) + n_step  # env steps one batch may take
        obs_shape = tuple(observation_space.shape or ())
        if frame_stack:  # observations travel as frame ids; the new frames travel once
            obs = (Column("obs", rows, (), "int64"), Column("next_obs", rows, (), "int64"))
            n_frames = 2 * n_envs * steps + n_envs
            frames: tuple[Column, ...] = (
                Column("frame_pixels", n_frames, obs_shape[1:], str(observation_space.dtype)),
                Column("frame_prev", n_frames, (), "int64"),
            )
        else:
            dtype = str(observation_space.dtype)
            obs = (
                Column("obs", rows, obs_shape, dtype),
                Column("next_obs", rows, obs_shape, dtype),
            )
            frames = ()
        if isinstance(action_space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete)):
            action = Column("action", rows, tuple(action_space.shape or ()), "int64")
        else:
            action = Column(
                "action", rows, tuple(action_space.shape or ()), str(action_space.dtype)
            )
        columns = (
            obs[0],
            action,
            Column("reward", rows, (), "float32"),
            obs[1],
            Column("discount", rows, (), "float32"),
            *((Column("priority", rows, (), "float32"),) if priorities else ()),
            *frames,
            *_episodes(rows + n_envs),
        )
        return cls(columns)

    @classmethod
    def for_sequences(
        cls,
        observation_space: gym.Space,
        n_buffer: int,
        n_envs: int,
        shape: SequenceShape,
        priorities: bool = False,
    ) -> BatchLayout:
        """The layout for batches of ``n_buffer`` sequences of ``shape`` from ``n_envs`` envs
        (every episode that ends finishes at least one sequence, so a batch's episodes fit its
        rows), with each sequence's key (:attr:`~border_py.sequences.Sequences.key`)."""
        rows = n_buffer + n_envs * shape.per_env_step
        T, L = shape.steps, shape.length
        columns = (
            Column(
                "obs", rows, (T, *(observation_space.shape or ())), str(observation_space.dtype)
            ),
            Column("action", rows, (T,), "int64"),
            Column("reward", rows, (T,), "float32"),
            Column("present", rows, (T,), "bool"),
            Column("state", rows, shape.state, "float32"),
            Column("burn", rows, (), "int64"),
            Column("first_prev_action", rows, (), "int64"),
            Column("first_prev_reward", rows, (), "float32"),
            Column("ret", rows, (L,), "float32"),
            Column("discount", rows, (L,), "float32"),
            Column("offset", rows, (L,), "int64"),
            Column("mask", rows, (L,), "bool"),
            Column("key", rows, (3,), "int64"),
            *((Column("priority", rows, (), "float32"),) if priorities else ()),
            *_episodes(rows + n_envs),
        )
        return cls(columns, burn_in=shape.burn_in)

    @property
    def nbytes(self) -> int:
        """Bytes of one slot."""
        return sum(c.nbytes for c in self.columns)

    def capacity(self, name: str) -> int:
        """Rows of the named array."""
        return next(c.rows for c in self.columns if c.name == name)

    def views(self, buffer: np.ndarray, offset: int) -> dict[str, np.ndarray]:
        """The slot at byte ``offset`` of ``buffer`` as named arrays (views, no copy)."""
        arrays = {}
        for column in self.columns:
            size = column.rows * math.prod(column.shape) * np.dtype(column.dtype).itemsize
            raw = buffer[offset : offset + size]
            arrays[column.name] = raw.view(column.dtype).reshape(column.rows, *column.shape)
            offset += column.nbytes
        return arrays


def _episodes(rows: int) -> tuple[Column, Column]:
    """The returns and lengths of the episodes that ended while a batch was sampled."""
    return Column("episode_returns", rows, (), "float64"), Column(
        "episode_lengths", rows, (), "int64"
    )
