"""The learner's prefetch on a CUDA device (``pytest -m gpu``; skipped without one): batches staged
in pinned memory and copied on the thread's own stream arrive as the batches sampled inline, and
the TD errors copied back without blocking land on their rows."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.batch import TensorBatch
from border_py.agents.dqn import DQN
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.replay.uniform import UniformReplayBuffer
from border_py.trainers.prefetch import Prefetcher
from border_py.transitions import Transitions

from ..trainers.test_prefetch import held

pytestmark = pytest.mark.gpu

FRAMES = gym.spaces.Box(0, 255, (4, 36, 36), np.uint8)  # the Nature CNN's smallest input
SIX = gym.spaces.Discrete(6)
FIELDS = ("obs", "action", "reward", "next_obs", "discount", "weight")
STEPS = 20


def _transitions(n: int, seed: int) -> Transitions:
    rng = np.random.default_rng(seed)
    return Transitions(
        rng.integers(0, 256, (n, *FRAMES.shape), dtype=np.uint8),
        rng.integers(0, 6, n),
        rng.normal(size=n).astype(np.float32),
        rng.integers(0, 256, (n, *FRAMES.shape), dtype=np.uint8),
        np.where(rng.random(n) < 0.1, 0.0, 0.99).astype(np.float32),
    )


class Recording(DQN):
    """DQN on CUDA noting each batch it trains on and the TD errors it returns, on the host."""

    def __init__(self) -> None:
        super().__init__(FRAMES, SIX, "cuda", hidden_sizes=[64], batch_size=32)
        self.seen: list[dict[str, torch.Tensor | None]] = []
        self.td: list[np.ndarray] = []

    def update_tensors(self, batch: TensorBatch) -> dict[str, Any]:
        assert all(t.device.type == "cuda" for t in batch.tensors())
        self.seen.append({name: _on_host(getattr(batch, name)) for name in FIELDS})
        metrics = super().update_tensors(batch)
        self.td.append(metrics["td_error"].cpu().numpy().astype(np.float64))
        return metrics


def _on_host(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.cpu()


def test_pinned_batches_arrive_as_the_batches_sampled_inline():
    buffer, twin = UniformReplayBuffer(512, seed=3), UniformReplayBuffer(512, seed=3)
    data = _transitions(512, 0)
    buffer.push(data)
    twin.push(data)
    agent = Recording()
    prefetcher = Prefetcher(agent, buffer, depth=2)
    try:
        for _ in range(STEPS):
            assert prefetcher.learn() is not None
    finally:
        prefetcher.close(flush=True)
    assert len(agent.seen) == STEPS
    for step, seen in enumerate(agent.seen):
        inline = TensorBatch.of(twin.sample(32), torch.device("cpu"), discrete=True)
        for name in FIELDS:
            want = getattr(inline, name)
            got = seen[name]
            if want is None:
                assert got is None, (step, name)
            else:
                assert got is not None and torch.equal(got, want), (step, name)


def test_td_errors_copied_back_without_blocking_land_on_their_rows():
    buffer = PrioritizedReplayBuffer(capacity=256, seed=0, alpha=0.5)
    buffer.push(_transitions(256, 1))
    agent = Recording()
    prefetcher = Prefetcher(agent, buffer, depth=2)
    indices = []
    try:
        for _ in range(STEPS):
            with held(prefetcher):  # the thread cannot write this step's back before we look
                prefetcher.learn()
                pending = prefetcher._pending  # this step's rows, written back during the next
                assert pending is not None
                indices.append(pending.index.copy())
    finally:
        prefetcher.close(flush=True)
    expected: dict[int, float] = {}
    for index, td in zip(indices, agent.td, strict=True):  # in order: the last write wins
        for row, value in zip(index, td, strict=True):
            prio = buffer.prioritization
            expected[int(row)] = (abs(value) + prio.eps) ** prio.alpha
    priorities = buffer.priorities()
    for row, want in expected.items():
        assert priorities[row] == pytest.approx(want, rel=1e-6), row
