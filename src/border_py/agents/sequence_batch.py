"""One conversion of a :class:`~border_py.sequences.Sequences` batch into tensors, for the
recurrent learner (:mod:`border_py.agents.r2d2`), as :mod:`border_py.agents.batch` does for
transitions.

Padding is made inert here, once: whatever a padded entry holds (zeros, stale values, NaN), the
tensors the learner computes with hold a fixed harmless value there. Observations and the core's
previous-action/reward inputs are zeroed (``-1``: no previous action) where ``present`` is False;
the learning steps' action, n-step return, discount and offset are ``0, 0, 0, 1`` where ``mask``
is False. A masked-out value is then selected away (``torch.where``) rather than multiplied by 0,
and since it is finite its gradient is an exact 0 too (a NaN times 0 would poison the gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from border_py.agents.batch import obs_tensor, to_device
from border_py.sequences import Sequences

__all__ = ["SequenceBatch"]


@dataclass(frozen=True)
class SequenceBatch:
    """A batch of sequences as tensors on the learner's device (``T = B + L + N`` stored steps,
    ``L`` learning steps; see :mod:`border_py.sequences`).

    Attributes:
        obs: ``(rows, T, *obs_shape)``, uint8 or float32 (:func:`obs_tensor`), 0 where not present.
        prev_action: int64 ``(rows, T)``: the action before each index (-1: none, and on padding).
        prev_reward: float32 ``(rows, T)``: the reward before each index (0 on padding).
        present: bool ``(rows, T)``.
        state: float32 ``(rows, k, hidden)``: the core's state before the first present index.
        burn: int64 ``(rows,)``: real burn-in steps, at ``[B - burn, B)``.
        action: int64 ``(rows, L)``: the action taken at each learning step (0 where masked).
        ret: float32 ``(rows, L)``: n-step discounted reward sums (0 where masked).
        discount: float32 ``(rows, L)``: what multiplies the bootstrap value (0 where masked).
        offset: int64 ``(rows, L)``: steps to the bootstrap observation (1 where masked).
        mask: bool ``(rows, L)``: a real action was taken at the learning step.
        weight: float32 ``(rows,)`` importance-sampling weights of a prioritized sample, or None.
        burn_in: ``B``.
    """

    obs: torch.Tensor
    prev_action: torch.Tensor
    prev_reward: torch.Tensor
    present: torch.Tensor
    state: torch.Tensor
    burn: torch.Tensor
    action: torch.Tensor
    ret: torch.Tensor
    discount: torch.Tensor
    offset: torch.Tensor
    mask: torch.Tensor
    weight: torch.Tensor | None
    burn_in: int

    @classmethod
    def of(cls, seq: Sequences, device: torch.device, pinned: bool = False) -> SequenceBatch:
        """Convert ``seq`` once, its padding made inert (see the module docstring);
        ``pinned``: through page-locked memory without blocking (CUDA: the learner's prefetch,
        see :mod:`border_py.agents.batch`)."""
        prev_action, prev_reward = seq.previous()  # -1 / 0.0 on padding already
        mask = np.asarray(seq.mask, dtype=bool)
        learning = slice(seq.burn_in, seq.burn_in + seq.length)
        present = np.asarray(seq.present, dtype=bool)
        shown = present.reshape(present.shape + (1,) * (seq.obs.ndim - 2))
        f32, i64 = torch.float32, torch.int64

        def tensor(array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
            return to_device(array, dtype, device, pinned)

        return cls(
            obs=obs_tensor(np.where(shown, seq.obs, np.zeros((), seq.obs.dtype)), device, pinned),
            prev_action=tensor(prev_action, i64),
            prev_reward=tensor(prev_reward, f32),
            present=tensor(present, torch.bool),
            state=tensor(seq.state, f32),
            burn=tensor(seq.burn, i64),
            action=tensor(np.where(mask, seq.action[:, learning], 0), i64),
            ret=tensor(np.where(mask, seq.ret, 0.0), f32),
            discount=tensor(np.where(mask, seq.discount, 0.0), f32),
            offset=tensor(np.where(mask, seq.offset, 1), i64),
            mask=tensor(mask, torch.bool),
            weight=None if seq.weight is None else tensor(seq.weight, f32),
            burn_in=seq.burn_in,
        )

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the batch (e.g. to mark them used on another CUDA stream)."""
        parts = [self.obs, self.prev_action, self.prev_reward, self.present, self.state]
        parts += [self.burn, self.action, self.ret, self.discount, self.offset, self.mask]
        return [t for t in [*parts, self.weight] if t is not None]
