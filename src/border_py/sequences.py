"""Sequences: the unit of data of recurrent agents (R2D2), cut by actors from one episode of one
env, stored whole in replay and unrolled whole by the learner.

A sequence is a window of ``T = B + L + N`` stored steps (``B`` burn-in, ``L`` learning steps,
``N`` the n-step bootstrap tail) that never crosses an episode:

    index:  0 ....... B-1 | B .......... B+L-1 | B+L ...... B+L+N-1
            burn-in          learning steps       bootstrap tail

- ``present[t]``: ``obs[t]`` is an observation of the episode (its final one included). A window
  whose learning start is episode step ``s`` has ``burn = min(B, s)`` real burn-in steps, at
  ``[B - burn, B)``; the indices before them are padding, as is everything after the episode's
  final observation.
- ``state``: the recurrent state the actor had *before* it acted on the first present index
  ``B - burn`` (zeros when that is the episode's first step).
- ``first_prev_action`` / ``first_prev_reward``: the action and reward that preceded the first
  present index (``-1`` and ``0.0`` at the episode's first step); the core's previous-action and
  previous-reward inputs at later indices are ``action[t-1]`` and ``reward[t-1]``
  (:meth:`Sequences.previous`).
- For each learning index ``t`` in ``[B, B+L)``, precomputed as :mod:`border_py.transitions` does
  for a transition: ``ret[t] = sum_{k<m} gamma^k reward[t+k]``, ``discount[t]`` (``gamma^m``, or
  0 when the episode terminated within those ``m`` steps; a time-limit truncation still
  bootstraps) and ``offset[t] = m`` (``1 <= m <= N``; the bootstrap observation is
  ``obs[t + m]``). ``mask[t]``: an action of the episode was taken at ``t``. The columns of the
  learning steps are ``(rows, L)``; the others ``(rows, T, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["STORED_SEQUENCE", "Sequences"]

STORED_SEQUENCE = (
    "obs",
    "action",
    "reward",
    "present",
    "state",
    "burn",
    "first_prev_action",
    "first_prev_reward",
    "ret",
    "discount",
    "offset",
    "mask",
)


@dataclass
class Sequences:
    """A batch of sequences as numpy arrays: what actors send and sequence replay stores.

    Only the fields in :data:`STORED_SEQUENCE` are stored; ``weight`` (importance-sampling weights
    of a prioritized sample, max 1), ``index`` (the rows a sample drew) and ``priority`` (initial
    priorities from the actor) are metadata, as for :class:`~border_py.transitions.Transitions`,
    and so is ``key``: int64 ``(rows, 3)``, each sequence's ``(stream, episode, start)`` as the
    actor cut it (:class:`~border_py.actors.sequencer.SequenceBuilder`), by which a ring of steps
    (:mod:`border_py.replay.sequence_store`) stores a step shared by overlapping sequences once.

    Attributes:
        obs: ``(rows, T, *obs_shape)``.
        action: int64 ``(rows, T)``: the action taken at ``obs[t]`` (0 where none was).
        reward: float32 ``(rows, T)``: the one-step reward that followed ``action[t]``.
        present: bool ``(rows, T)``: ``obs[t]`` is an observation of the episode.
        state: float32 ``(rows, k, hidden)``: the core's state before the first present index
            (``k = 2``, ``(h, c)``, for an LSTM; 1 for a GRU).
        burn: int64 ``(rows,)``: real burn-in steps, at ``[B - burn, B)``.
        first_prev_action: int64 ``(rows,)``: the action before the first present index (-1:
            none, the episode's first step).
        first_prev_reward: float32 ``(rows,)``: the reward before it (0.0 at the episode start).
        ret: float32 ``(rows, L)``: the n-step discounted reward sum of each learning step.
        discount: float32 ``(rows, L)``: what multiplies the bootstrap value.
        offset: int64 ``(rows, L)``: steps to the bootstrap observation (``obs[B + i + offset]``).
        mask: bool ``(rows, L)``: a real action was taken at the learning step.
        burn_in: ``B``: the burn-in indices every row has room for (the window's shape, with
            ``L`` and ``T`` read from the arrays: ``N = T - B - L``).
    """

    obs: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    present: np.ndarray
    state: np.ndarray
    burn: np.ndarray
    first_prev_action: np.ndarray
    first_prev_reward: np.ndarray
    ret: np.ndarray
    discount: np.ndarray
    offset: np.ndarray
    mask: np.ndarray
    burn_in: int
    weight: np.ndarray | None = None
    index: np.ndarray | None = None
    priority: np.ndarray | None = None
    key: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.burn)

    @property
    def steps(self) -> int:
        """``T``: stored steps per row."""
        return int(self.action.shape[1])

    @property
    def length(self) -> int:
        """``L``: learning steps per row."""
        return int(self.mask.shape[1])

    def arrays(self) -> dict[str, np.ndarray]:
        """Stored field name -> array."""
        return {name: getattr(self, name) for name in STORED_SEQUENCE}

    def previous(self) -> tuple[np.ndarray, np.ndarray]:
        """The core's previous-action and previous-reward inputs at every index, ``(rows, T)``:
        ``action[t-1]`` and ``reward[t-1]``, the stored first ones at each row's first present
        index, and -1 / 0.0 on padding."""
        rows, steps = self.action.shape
        prev_action = np.full((rows, steps), -1, dtype=np.int64)
        prev_reward = np.zeros((rows, steps), dtype=np.float32)
        prev_action[:, 1:] = self.action[:, :-1]
        prev_reward[:, 1:] = self.reward[:, :-1]
        first = self.burn_in - self.burn
        at = np.arange(rows)
        prev_action[at, first] = self.first_prev_action
        prev_reward[at, first] = self.first_prev_reward
        before = np.arange(steps)[None, :] < first[:, None]
        prev_action[~self.present | before] = -1
        prev_reward[~self.present | before] = 0.0
        return prev_action, prev_reward

    @property
    def tail(self) -> int:
        """``N``: the bootstrap tail (stored steps past the learning steps: ``n_step``)."""
        return self.steps - self.length - self.burn_in

    @staticmethod
    def concat(parts: list[Sequences]) -> Sequences:
        """One batch made of ``parts`` in order (their priorities and keys too; no sample
        metadata)."""
        if len({(p.burn_in, p.steps, p.length) for p in parts}) > 1:
            raise ValueError("sequences of different shapes (burn_in, steps, length) cannot join")
        columns = {
            name: np.concatenate([getattr(p, name) for p in parts]) for name in STORED_SEQUENCE
        }
        out = Sequences(**columns, burn_in=parts[0].burn_in)
        if all(p.priority is not None for p in parts):
            out.priority = np.concatenate([p.priority for p in parts])
        if all(p.key is not None for p in parts):
            out.key = np.concatenate([p.key for p in parts])
        return out
