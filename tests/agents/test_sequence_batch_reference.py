"""The conversion of sampled sequences into a SequenceBatch, sped up for the fed learner, against
its code before the change (kept here as the reference): the same tensors to the bit, for every
observation dtype, with garbage in the padding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from border_py.agents.batch import obs_tensor, to_device
from border_py.agents.sequence_batch import SequenceBatch
from border_py.sequences import Sequences
from tests.agents.sequence_data import random_sequences, with_garbage

CPU = torch.device("cpu")
ROWS = [(0, None), (1, None), (3, None), (3, 4), (2, 8), (0, 5), (3, 6)]


def _reference(seq: Sequences) -> list[torch.Tensor]:
    """``SequenceBatch.of(seq, CPU).tensors()`` before the change."""
    prev_action, prev_reward = seq.previous()
    mask = seq.mask.astype(bool)
    learning = slice(seq.burn_in, seq.burn_in + seq.length)
    present = to_device(seq.present, torch.bool, CPU)
    blank = ~present.reshape(present.shape + (1,) * (seq.obs.ndim - 2))
    obs = obs_tensor(seq.obs, CPU)
    parts = [
        torch.where(blank, torch.zeros((), dtype=obs.dtype), obs),
        torch.as_tensor(prev_action, dtype=torch.int64),
        torch.as_tensor(prev_reward, dtype=torch.float32),
        present,
        torch.as_tensor(seq.state, dtype=torch.float32),
        torch.as_tensor(seq.burn, dtype=torch.int64),
        torch.as_tensor(np.where(mask, seq.action[:, learning], 0), dtype=torch.int64),
        torch.as_tensor(np.where(mask, seq.ret, 0.0), dtype=torch.float32),
        torch.as_tensor(np.where(mask, seq.discount, 0.0), dtype=torch.float32),
        torch.as_tensor(np.where(mask, seq.offset, 1), dtype=torch.int64),
        torch.as_tensor(mask, dtype=torch.bool),
    ]
    if seq.weight is not None:
        parts.append(torch.as_tensor(seq.weight, dtype=torch.float32))
    return parts


def _observations(seq: Sequences, dtype: type) -> Sequences:
    """``seq`` with observations of ``dtype`` (pixels: uint8 and bool), garbage where absent."""
    rng = np.random.default_rng(5)
    shape = (*seq.obs.shape[:2], 2, 3)
    obs = {
        np.float32: rng.normal(size=shape).astype(np.float32),
        np.float64: rng.normal(size=shape),
        np.uint8: rng.integers(0, 256, shape).astype(np.uint8),
        bool: rng.random(shape) < 0.5,
    }[dtype]
    obs[~seq.present] = 7 if dtype in (np.uint8, bool) else np.nan
    return dataclasses.replace(seq, obs=obs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, bool])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_tensors_equal_the_reference_to_the_bit(dtype, weighted):
    seq = _observations(with_garbage(random_sequences(ROWS, seed=2)), dtype)
    if weighted:
        seq.weight = np.linspace(0.1, 1.0, len(seq), dtype=np.float32)
    batch = SequenceBatch.of(seq, CPU)
    expected = _reference(seq)
    assert len(batch.tensors()) == len(expected)
    for got, want in zip(batch.tensors(), expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.numpy().tobytes() == want.numpy().tobytes()
