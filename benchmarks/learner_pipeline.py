"""The learner's pipeline on CPU: opt steps/s of a learner fed by actors against a bare loop of
updates on tensors made beforehand, with and without the prefetch thread (``trainer.prefetch``),
as ratios measured in this one process.

Nature-CNN DQN (Atari shapes: uint8 (4, 84, 84) observations, 6 actions, batch ``--batch-size``),
prioritized replay with frame storage (``frame_stack=4``, as the Atari path stores frames),
filled with ``--fill`` synthetic frames. One torch thread, as in the learner.

- ``bare``: ``update_tensors`` on one batch converted beforehand, nothing else;
- ``fed``: the learner's work per opt step: the pushes the actors deliver at the rate the gate
  lets them (``--replay-ratio``: opt steps x batch size per env step; batches of
  ``--actor-batch``, pushed under the buffer's lock
  as the loop's ``ingest`` does), then one opt step: ``learn_step`` (sample, convert, update,
  priorities: ``fed_no_prefetch``) or the prefetcher's (``fed``, depth ``--depth``).

The actors' pushes are simulated at their gated rate in the learner's process (the figure is the
learner's: on this 2-core machine real actor processes would take the core the prefetch thread
uses). Phases alternate, each ``--seconds`` long, ``--repeats`` times; each
figure is the best of its repeats.

    python benchmarks/learner_pipeline.py [--seconds 8] [--repeats 2] [--depth 1 2]

Ends with one line ``RESULT {json}``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from replay_bench import atari_rows  # the same synthetic Atari frames (same folder)

from border_py.agents.batch import TensorBatch
from border_py.agents.dqn import DQN
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.trainers.loop import learn_step
from border_py.trainers.prefetch import Prefetcher


def make_agent(batch_size: int, device: str = "cpu") -> DQN:
    obs = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    return DQN(
        obs,
        gym.spaces.Discrete(6),
        device,
        seed=0,
        hidden_sizes=[512],
        network="cnn",
        batch_size=batch_size,
    )


class Feed:
    """Pushes, per opt step, the transitions the actors deliver at the gate's replay ratio."""

    def __init__(
        self, buffer: PrioritizedReplayBuffer, first: int, per_opt: float, batch: int
    ) -> None:
        self.buffer, self.next_id, self.per_opt, self.batch = buffer, first, per_opt, batch
        self.rng = np.random.default_rng(2)
        self.owed = 0.0

    def __call__(self, lock: Any) -> None:
        self.owed += self.per_opt
        while self.owed >= self.batch:
            rows = atari_rows(self.next_id, self.batch, self.rng)
            with lock:
                self.buffer.push(rows)
            self.next_id += self.batch
            self.owed -= self.batch


def opts_per_second(
    step: Callable[[], Any], seconds: float, device: torch.device, warmup: int = 3
) -> float:
    """Steps per second over about ``seconds``, after ``warmup`` steps off the clock (a CUDA
    device synchronised before the clock starts and stops: the figure counts finished work, not
    queued kernels). At least one step is timed."""
    for _ in range(warmup):
        step()
    sync(device)
    done, start = 0, time.perf_counter()
    while done == 0 or time.perf_counter() - start < seconds:
        step()
        done += 1
    sync(device)
    return done / (time.perf_counter() - start)


def sync(device: torch.device) -> None:
    """Wait for the work queued on a CUDA ``device`` (nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def phase(
    name: str, args: argparse.Namespace, buffer: PrioritizedReplayBuffer, depth: int = 0
) -> float:
    agent = make_agent(args.batch_size, args.device)
    if name == "bare":
        prepared = TensorBatch.of(buffer.sample(args.batch_size), agent.device, True)
        return opts_per_second(
            lambda: agent.update_tensors(prepared), args.seconds, agent.device, args.warmup
        )
    feed = Feed(buffer, buffer.rows_written, args.batch_size / args.replay_ratio, args.actor_batch)
    if depth == 0:
        nolock = _NoLock()
        return opts_per_second(
            lambda: (feed(nolock), learn_step(agent, buffer)),
            args.seconds,
            agent.device,
            args.warmup,
        )
    prefetcher = Prefetcher(agent, buffer, depth)
    try:
        return opts_per_second(
            lambda: (feed(prefetcher.lock), prefetcher.learn()),
            args.seconds,
            agent.device,
            args.warmup,
        )
    finally:
        prefetcher.close(flush=True)


def filled(args: argparse.Namespace) -> PrioritizedReplayBuffer:
    """The buffer every phase uses: ``--fill`` synthetic frames, one transition each."""
    buffer = PrioritizedReplayBuffer(args.capacity, seed=0, frame_stack=4)
    rng = np.random.default_rng(0)
    for first in range(0, args.fill, 1000):
        buffer.push(atari_rows(first, 1000, rng))
    return buffer


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="per phase and repeat")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3, help="steps off the clock per phase")
    parser.add_argument("--depth", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--fill", type=int, default=20_000)
    parser.add_argument("--replay-ratio", type=float, default=8.0, help="Dopamine's DQN: 8")
    parser.add_argument("--actor-batch", type=int, default=16)
    parser.add_argument("--device", default="cpu", help="the learner's: cpu or cuda")
    args = parser.parse_args()
    torch.set_num_threads(1)
    phases = [("bare", 0), ("fed_no_prefetch", 0)] + [(f"fed_depth_{d}", d) for d in args.depth]
    best: dict[str, float] = {}
    buffer = filled(args)
    for repeat in range(args.repeats):
        for name, depth in phases:
            rate = phase(name, args, buffer, depth)
            best[name] = max(best.get(name, 0.0), rate)
            print(f"repeat {repeat}: {name:>16} {rate:7.2f} opt/s", flush=True)
    bare = best["bare"]
    result: dict[str, Any] = {f"{k}_opt_per_sec": round(v, 2) for k, v in best.items()}
    result["fed_vs_bare_no_prefetch"] = round(best["fed_no_prefetch"] / bare, 3)
    for d in args.depth:
        result[f"fed_vs_bare_depth_{d}"] = round(best[f"fed_depth_{d}"] / bare, 3)
    result["fed_vs_bare"] = max(result[f"fed_vs_bare_depth_{d}"] for d in args.depth)
    print(
        f"{'':>26}vs bare: no prefetch {result['fed_vs_bare_no_prefetch']:.3f}x, "
        f"prefetch {result['fed_vs_bare']:.3f}x"
    )
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
