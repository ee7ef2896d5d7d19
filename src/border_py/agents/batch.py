"""One conversion of a :class:`~border_py.transitions.Transitions` batch into tensors, for every agent.

Observations keep their compact dtype: uint8 pixels (or uint8 vectors) travel to the device as
uint8 and are converted to float and scaled by 1/255 inside the network's first module
(:class:`~border_py.agents.networks.NatureCNN`, :class:`~border_py.agents.networks.VectorInput`);
any other observation dtype becomes float32. Rewards, discounts and importance weights are float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from border_py.transitions import Transitions


def obs_tensor(obs: np.ndarray, device: torch.device) -> torch.Tensor:
    """Observations on ``device``: uint8 as uint8, anything else as float32."""
    if obs.dtype == np.uint8:
        return torch.as_tensor(obs, device=device)
    return torch.as_tensor(obs, dtype=torch.float32, device=device)


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
    def of(cls, batch: Transitions, device: torch.device, discrete: bool) -> TensorBatch:
        """Convert ``batch`` once; ``discrete`` actions become int64 indices, else float32."""
        weight = batch.weight
        return cls(
            obs=obs_tensor(batch.obs, device),
            action=torch.as_tensor(
                batch.action, dtype=torch.int64 if discrete else torch.float32, device=device
            ),
            reward=torch.as_tensor(batch.reward, dtype=torch.float32, device=device),
            next_obs=obs_tensor(batch.next_obs, device),
            discount=torch.as_tensor(batch.discount, dtype=torch.float32, device=device),
            weight=None
            if weight is None
            else torch.as_tensor(weight, dtype=torch.float32, device=device),
        )

    def weighted_mean(self, per_sample: torch.Tensor) -> torch.Tensor:
        """The batch loss: the mean of the per-sample losses, each multiplied once by its
        importance weight under prioritized replay."""
        if self.weight is None:
            return per_sample.mean()
        return (per_sample * self.weight).mean()
