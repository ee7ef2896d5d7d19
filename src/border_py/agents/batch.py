"""One conversion of a :class:`~border_py.transitions.Transitions` batch into tensors, for every agent.

Observations keep their compact dtype: uint8 pixels (or uint8 vectors) travel to the device as
uint8 and are converted to float and scaled by 1/255 inside the network's first module
(:class:`~border_py.agents.networks.NatureCNN`, :class:`~border_py.agents.networks.VectorInput`);
any other observation dtype becomes float32. Rewards, discounts and importance weights are float32.

``pinned=True`` (the learner's prefetch thread on CUDA) stages each array in page-locked host
memory and copies it with ``non_blocking=True``: the copy runs on the device's copy engine while
the thread goes on, and the caller orders it before use (a CUDA event). On CPU, and with
``pinned=False``, the conversion is ``torch.as_tensor`` as it always was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from border_py.transitions import Transitions

__all__ = ["TensorBatch", "obs_tensor"]


def to_device(
    array: np.ndarray, dtype: torch.dtype | None, device: torch.device, pinned: bool = False
) -> torch.Tensor:
    """``array`` as a ``dtype`` tensor (None: its own) on ``device``; ``pinned``: through
    page-locked memory, copied without blocking (see the module docstring)."""
    if not pinned:
        return torch.as_tensor(array, dtype=dtype, device=device)
    return torch.as_tensor(array, dtype=dtype).pin_memory().to(device, non_blocking=True)


def obs_tensor(obs: np.ndarray, device: torch.device, pinned: bool = False) -> torch.Tensor:
    """Observations on ``device``: uint8 as uint8, anything else as float32."""
    return to_device(obs, None if obs.dtype == np.uint8 else torch.float32, device, pinned)


@dataclass(frozen=True)
class TensorBatch:
    """A batch of n-step transitions as tensors on the learner's device.

    Attributes:
        obs: observations ``s``, (B, *obs_shape), uint8 or float32 (see :func:`obs_tensor`).
        action: actions ``a``: int64 (B,) for discrete actions, float32 (B, *action_shape) else.
        reward: the discounted n-step reward sums ``R``, float32 (B,).
        next_obs: the observations ``s'`` to bootstrap from, like ``obs``.
        discount: ``d = gamma**k`` (0 after a terminal state), float32 (B,).
        weight: importance-sampling weights of a prioritized sample, float32 (B,), else None.
    """

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: torch.Tensor
    discount: torch.Tensor
    weight: torch.Tensor | None

    @classmethod
    def of(
        cls, batch: Transitions, device: torch.device, discrete: bool, pinned: bool = False
    ) -> TensorBatch:
        """Convert ``batch`` once; ``discrete`` actions become int64 indices, else float32;
        ``pinned``: through page-locked memory without blocking (CUDA; see the module docstring)."""
        f32, weight = torch.float32, batch.weight
        return cls(
            obs=obs_tensor(batch.obs, device, pinned),
            action=to_device(batch.action, torch.int64 if discrete else f32, device, pinned),
            reward=to_device(batch.reward, f32, device, pinned),
            next_obs=obs_tensor(batch.next_obs, device, pinned),
            discount=to_device(batch.discount, f32, device, pinned),
            weight=None if weight is None else to_device(weight, f32, device, pinned),
        )

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the batch (e.g. to mark them used on another CUDA stream)."""
        parts = [self.obs, self.action, self.reward, self.next_obs, self.discount, self.weight]
        return [t for t in parts if t is not None]

    def weighted_mean(self, per_sample: torch.Tensor) -> torch.Tensor:
        """The batch loss: the mean of the per-sample losses, each multiplied once by its
        importance weight under prioritized replay."""
        if self.weight is None:
            return per_sample.mean()
        return (per_sample * self.weight).mean()
