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

With ``--checkpoint`` it measures instead what a checkpoint of a full Atari-shaped buffer costs
(the Pong recipe's: prioritized, ``frame_stack=4``, 84x84 uint8 frames stored once, synthetic):
``--transitions`` of them are saved through the real checkpoint code and resumed through the real
resume code, each in a fresh process, whose peak resident memory during the save, and during the
resume, over the buffer's bytes, is ``save_peak_rss_ratio`` and ``resume_peak_rss_ratio``
(Linux: the peak, ``VmHWM``, is reset just before each). It needs about the buffer's size of
memory (1M transitions: ~7 GB) and of free disk (in ``--dir``, default the temp dir).

    python benchmarks/replay_bench.py [--capacity 1000000] [--atari-capacity 200000] [--batches 300]
    python benchmarks/replay_bench.py --checkpoint [--transitions 1000000] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import tempfile
import time
from pathlib import Path

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


def rss_kib(field: str) -> int:
    """This process's ``VmRSS`` (now) or ``VmHWM`` (its peak) in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> None:
    """Start this process's peak resident memory (``VmHWM``) afresh from now (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


def atari_buffer(transitions: int) -> PrioritizedReplayBuffer:
    return PrioritizedReplayBuffer(transitions, 0, beta_steps=1000, frame_stack=STACK)


def sample_digest(buffer: PrioritizedReplayBuffer) -> str:
    """A digest of the next sample of 64 (the same after an exact resume)."""
    batch = buffer.sample(64)
    digest = hashlib.sha256()
    for array in (batch.obs, batch.index, batch.weight, batch.action):
        digest.update(array.tobytes())
    return digest.hexdigest()


def save_child(root: str, transitions: int) -> dict:
    """Fill an Atari-shaped buffer, then save it in a checkpoint: its peak memory and seconds."""
    from border_py._version import __version__
    from border_py.runs.checkpoint import save_checkpoint
    from border_py.runs.state import TrainerState

    baseline = rss_kib("VmRSS")
    buffer = atari_buffer(transitions)
    fill(buffer, atari_rows, transitions, 10_000)
    state = TrainerState(0, transitions, transitions, {}, buffer.state(), {}, {})
    config = {"seed": 0, "env": {}, "agent": {}}
    reset_peak()
    start = time.perf_counter()
    save_checkpoint(
        Path(root),
        "000000001",
        policy={},
        agent_state={},
        state=state,
        config=config,
        meta={"replay_buffer": True, "border_py": __version__},
        buffer=buffer.arrays(),
    )
    seconds = time.perf_counter() - start
    peak = rss_kib("VmHWM")
    return {
        "nbytes": buffer.nbytes,
        "peak": (peak - baseline) * 1024,
        "seconds": seconds,
        "digest": sample_digest(buffer),
    }


def resume_child(root: str, transitions: int) -> dict:
    """Load the checkpoint and restore its buffer as a resume does: peak memory and seconds."""
    from border_py.runs.checkpoint import load_checkpoint
    from border_py.runs.resume import check_resume_memory

    baseline = rss_kib("VmRSS")
    reset_peak()
    start = time.perf_counter()
    checkpoint = load_checkpoint(Path(root) / "000000001")
    check_resume_memory(checkpoint, transitions, True)
    buffer = atari_buffer(transitions)
    arrays = checkpoint.buffer()
    assert arrays is not None
    buffer.load(checkpoint.state.replay, arrays)
    del arrays
    seconds = time.perf_counter() - start
    peak = rss_kib("VmHWM")
    return {
        "nbytes": buffer.nbytes,
        "peak": (peak - baseline) * 1024,
        "seconds": seconds,
        "digest": sample_digest(buffer),
    }


def in_child(function, *args) -> dict:
    """``function(*args)`` in a fresh (spawned) process."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def checkpoint_table(transitions: int, where: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="replay-bench-", dir=where) as root:
        saved = in_child(save_child, root, transitions)
        resumed = in_child(resume_child, root, transitions)
    gib = saved["nbytes"] / 2**30
    result = {
        "transitions": transitions,
        "buffer_gib": round(gib, 3),
        "save_peak_rss_ratio": round(saved["peak"] / saved["nbytes"], 3),
        "save_seconds": round(saved["seconds"], 2),
        "resume_peak_rss_ratio": round(resumed["peak"] / resumed["nbytes"], 3),
        "resume_seconds": round(resumed["seconds"], 2),
        "same_samples": saved["digest"] == resumed["digest"],
    }
    print(
        f"\ncheckpoint of a full Atari-shaped buffer ({transitions:,} transitions, {gib:.2f} GiB)"
    )
    for step in ("save", "resume"):
        print(
            f"{step:>7}: peak RSS {result[f'{step}_peak_rss_ratio']:.3f} x the buffer"
            f" (target <= 1.15), {result[f'{step}_seconds']:.1f} s"
        )
    print(f"the resumed buffer samples what the saved one would: {result['same_samples']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--atari-capacity", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--checkpoint", action="store_true", help="measure a checkpoint instead")
    parser.add_argument("--transitions", type=int, default=1_000_000)
    parser.add_argument("--dir", default=None, help="where --checkpoint writes (a temp dir in it)")
    args = parser.parse_args()
    if args.checkpoint:
        print("RESULT " + json.dumps(checkpoint_table(args.transitions, args.dir)))
        return
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
