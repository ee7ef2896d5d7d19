"""Replay-buffer costs on this machine, as ratios against the uniform buffer measured in the same run.

Prints three tables:
1. the learner's per-batch replay cost: ``sample(B)`` (uniform) against ``sample(B)`` +
   ``update_priorities`` (prioritized), CartPole-shaped rows, a full buffer of ``--capacity``
   (1M) rows, B = 128 and 256;
2. the same for Atari frame rows (``frame_stack=4``, 84x84 uint8 frames, episodes of 1000 steps)
   in a full buffer of ``--atari-capacity`` rows (default 200k: 1.4 GB; pass 1000000 for 7 GB);
3. memory: bytes per stored Atari transition at ``--capacity`` rows, from the arrays' ``nbytes``
   (storage is allocated lazily, so this needs no RAM), against two stacks per row (measured at
   10k rows: 1M would not fit).

    python benchmarks/replay_bench.py [--capacity 1000000] [--atari-capacity 200000] [--batches 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.replay.uniform import UniformReplayBuffer
from border_py.transitions import FrameChunk, Transitions

SIDE, STACK, EPISODE = 84, 4, 1000


def cartpole_rows(n: int, rng: np.random.Generator) -> Transitions:
    obs = rng.normal(size=(n, 4)).astype(np.float32)
    return Transitions(
        obs, rng.integers(0, 2, n), np.ones(n, np.float32), obs, np.full(n, 0.99, np.float32)
    )


def atari_rows(first: int, n: int, rng: np.random.Generator) -> Transitions:
    """``n`` new frames (ids ``first..first + n - 1``) of one stream, episodes of ``EPISODE``
    steps, and one 1-step transition ending at each of them."""
    ids = first + np.arange(n, dtype=np.int64)
    prev = np.where(ids % EPISODE == 0, ids, ids - 1)  # a reset frame pads with itself
    batch = Transitions(
        prev, rng.integers(0, 6, n), np.zeros(n, np.float32), ids, np.full(n, 0.99, np.float32)
    )
    pixels = rng.integers(0, 256, size=(n, SIDE, SIDE), dtype=np.uint8)
    batch.frames = FrameChunk(0, first, pixels, prev, max(first - 1, 0))
    return batch


def fill(buffer: UniformReplayBuffer, make, total: int, chunk: int) -> None:
    rng = np.random.default_rng(0)
    done = 0
    while done < total:
        n = min(chunk, total - done)
        buffer.push(make(done, n, rng))
        done += n


def per_batch_seconds(buffer: UniformReplayBuffer, batch_size: int, batches: int) -> float:
    """Mean seconds of one sample (plus the priority update when prioritized)."""
    rng = np.random.default_rng(1)
    for _ in range(10):  # warm up
        buffer.sample(batch_size)
    start = time.perf_counter()
    for _ in range(batches):
        batch = buffer.sample(batch_size)
        if batch.index is not None:
            buffer.update_priorities(batch.index, rng.random(batch_size))
    return (time.perf_counter() - start) / batches


def dqn_update_seconds(batch_size: int, batches: int) -> float:
    """Mean seconds of one update of the shipped DQN (128x128 MLP) on CartPole rows, for scale."""
    import gymnasium as gym
    import torch

    from border_py.agents.dqn import DQN

    torch.set_num_threads(1)
    space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    agent = DQN(space, gym.spaces.Discrete(2), hidden_sizes=[128, 128], batch_size=batch_size)
    batch = cartpole_rows(batch_size, np.random.default_rng(0))
    for _ in range(10):
        agent.update(batch)
    start = time.perf_counter()
    for _ in range(batches):
        agent.update(batch)
    return (time.perf_counter() - start) / batches


def cost_table(title: str, make, capacity: int, chunk: int, frames: bool, batches: int) -> None:
    stack = STACK if frames else None
    buffers = {
        "uniform": UniformReplayBuffer(capacity, 0, frame_stack=stack),
        "prioritized": PrioritizedReplayBuffer(capacity, 0, frame_stack=stack),
    }
    for buffer in buffers.values():
        fill(buffer, make, capacity, chunk)
    print(f"\n{title} ({capacity:,} rows, full)")
    print(
        f"{'batch':>6} | {'uniform sample':>15} | {'prioritized sample+update':>26} | ratio"
        + ("" if frames else " | for scale: a DQN update (128x128 MLP)")
    )
    for batch_size in (128, 256):
        uniform = per_batch_seconds(buffers["uniform"], batch_size, batches)
        prioritized = per_batch_seconds(buffers["prioritized"], batch_size, batches)
        line = (
            f"{batch_size:>6} | {uniform * 1e6:>12.0f} us | {prioritized * 1e6:>23.0f} us |"
            f" {prioritized / uniform:.2f}x"
        )
        if not frames:
            line += f" | {dqn_update_seconds(batch_size, batches) * 1e6:.0f} us"
        print(line)


def memory_table(capacity: int) -> None:
    rng = np.random.default_rng(0)
    framed = PrioritizedReplayBuffer(capacity, 0, frame_stack=STACK)
    framed.push(atari_rows(0, 8, rng))  # allocates everything (lazily: untouched pages are free)
    uniform_framed = UniformReplayBuffer(capacity, 0, frame_stack=STACK)
    uniform_framed.push(atari_rows(0, 8, rng))
    plain_capacity = min(capacity, 10_000)  # 1M rows of two stacks would be 56 GB
    stacks = UniformReplayBuffer(plain_capacity, 0)
    plain = atari_rows(0, 8, rng)
    stacks.push(
        Transitions(
            np.zeros((8, STACK, SIDE, SIDE), np.uint8),
            plain.action,
            plain.reward,
            np.zeros((8, STACK, SIDE, SIDE), np.uint8),
            plain.discount,
        )
    )
    target = 1.1 * SIDE * SIDE
    print(
        f"\nmemory per stored Atari transition at {capacity:,} rows (target <= {target:.0f} bytes)"
    )
    for name, buffer in (
        ("frame storage, prioritized", framed),
        ("frame storage, uniform", uniform_framed),
        (f"two stacks per row ({plain_capacity:,} rows)", stacks),
    ):
        per_row = buffer.nbytes / buffer.capacity
        print(
            f"{name:>32}: {per_row:>8.0f} bytes = {per_row / (SIDE * SIDE):.3f} x 84*84"
            f" ({per_row * capacity / 2**30:.2f} GiB for {capacity:,})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--atari-capacity", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args()
    cost_table(
        "CartPole rows",
        lambda first, n, rng: cartpole_rows(n, rng),
        args.capacity,
        100_000,
        False,
        args.batches,
    )
    if args.atari_capacity:
        cost_table(
            "Atari frame rows (frame_stack=4, 84x84)",
            atari_rows,
            args.atari_capacity,
            10_000,
            True,
            args.batches,
        )
    memory_table(args.capacity)


if __name__ == "__main__":
    main()
