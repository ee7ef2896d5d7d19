"""The replay buffer protocol: what the learning loop and checkpoints need from a replay buffer.

The shipped buffers implement it (:class:`~border_py.replay.uniform.UniformReplayBuffer`,
:class:`~border_py.replay.prioritized.PrioritizedReplayBuffer`); a user's own buffer
(``replay_buffer._target_=my_pkg.MyBuffer``) does too. Its constructor receives its YAML keys
(``seed`` derived from the root seed when null).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from border_py.transitions import Transitions

__all__ = ["OverwriteTracking", "PrioritizedReplay", "ReplayBuffer"]


@runtime_checkable
class ReplayBuffer(Protocol):
    """A store of transitions the learner samples from.

    Attributes:
        capacity: transitions kept at most.
        frame_stack: null, or ``k``: observations arrive as frame ids with their new frames
            (:mod:`border_py.replay.frames`), and actors must send them so.
        needs_td_errors: the buffer's samples carry ``index`` and ``weight``, and the agent's
            ``update`` must return ``td_error`` for them (prioritized replay).
        priority_from_actors: actors must attach initial priorities to the batches they send.
    """

    capacity: int
    frame_stack: int | None
    needs_td_errors: bool
    priority_from_actors: bool

    def __len__(self) -> int:
        """Transitions stored."""

    def check_observations(self, observation_space: gym.Space) -> None:
        """Raise a one-line ConfigError if the buffer cannot store these observations."""

    def push(self, batch: Transitions) -> None:
        """Store a batch (copying it: its arrays may be reused by the caller afterwards)."""

    def sample(self, batch_size: int) -> Transitions:
        """A batch for one optimization step."""

    def state(self) -> dict[str, Any]:
        """Positions, counters and RNG state, as plain data (always checkpointed)."""

    def arrays(self) -> dict[str, np.ndarray]:
        """The stored transitions (checkpointed with ``trainer.save_replay_buffer``)."""

    def load(self, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
        """Restore :meth:`state` and :meth:`arrays`."""

    def continue_schedule(self, state: dict[str, Any]) -> None:
        """Continue :meth:`state`'s sampling schedule without the saved transitions."""


@runtime_checkable
class PrioritizedReplay(ReplayBuffer, Protocol):
    """A replay buffer whose samples (``index`` set) take their TD errors back as priorities."""

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        """The sampled rows' new TD errors."""


@runtime_checkable
class OverwriteTracking(Protocol):
    """A buffer that can tell which rows were overwritten since a sample (the learner's prefetch
    writes priorities back after later pushes: a row overwritten meanwhile keeps its new
    transition's priority).

    Attributes:
        rows_written: rows pushed so far (a monotonic count).
    """

    rows_written: int

    def overwritten(self, idx: np.ndarray, since: int) -> np.ndarray:
        """Which rows ``idx`` were written after :attr:`rows_written` was ``since`` (bool)."""
