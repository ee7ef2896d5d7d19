"""Sequence replay storing each env step once (``steps_per_sequence`` set: a ring of steps),
against storing each sequence whole (null, the default), measured in the same run on the same
sequences.

The sequences come from the real sequence builder (:mod:`border_py.actors.sequencer`) over
``--envs`` envs with episodes of 50-400 steps and R2D2's defaults here (burn-in 8, length 16,
period 8, n-step 5: ``T = 29`` stored steps a sequence), for MinAtar-shaped observations (uint8
``(4, 10, 10)``) and CartPole-shaped ones (float32 ``(4,)``). For each it prints and puts in the
``RESULT`` line:

- ``bytes_per_step``: the buffer's allocated bytes (:attr:`nbytes`, full) per env step its
  sequences cover (a sequence advances ``period`` env steps): the whole-sequence layout against
  the step ring sized ``steps_per_sequence = period + 1``;
- ``insert``: CPU seconds per sequence pushed (with the sequences' keys), and the ratio of the
  ring's to the whole layout's;
- ``sample``: CPU seconds per ``sample(--batch)`` of a full buffer, and its ratio.

CPU seconds of this process (``time.process_time``), not wall time: a shared machine's other
work does not stretch them.

    python benchmarks/sequence_replay_bench.py [--capacity 10000] [--batch 32] [--samples 300]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time

import numpy as np

from border_py.actors.sequencer import SequenceBuilder
from border_py.envs.vector import VectorStep
from border_py.replay.sequence_replay import SequenceReplayBuffer
from border_py.sequences import Sequences

BURN_IN, LENGTH, PERIOD, N_STEP = 8, 16, 8, 5
SHAPES = {"minatar": ((4, 10, 10), np.uint8), "vector": ((4,), np.float32)}


def sequences(kind: str, n_envs: int, total: int) -> list[Sequences]:
    """At least ``total`` sequences, in batches as a sampler takes them, with the builder's keys."""
    shape, dtype = SHAPES[kind]
    rng = np.random.default_rng(0)
    builder = SequenceBuilder(n_envs, BURN_IN, LENGTH, PERIOD, N_STEP, 0.99, (2, 64))
    left = rng.integers(50, 400, n_envs)
    out, count = [], 0
    while count < total:
        obs = rng.integers(0, 2, (n_envs, *shape)).astype(dtype)
        left -= 1
        ends = left == 0
        left[ends] = rng.integers(50, 400, int(ends.sum()))
        step = VectorStep(
            obs, obs, rng.random(n_envs).astype(np.float32), ends, ends & False, [], []
        )
        builder.add(obs, np.zeros((n_envs, 2, 64), np.float32), rng.integers(0, 3, n_envs), step)
        batch = builder.take()
        if batch is not None:
            out.append(batch)
            count += len(batch)
    return out


def measure(buffer, batches, samples: int, batch_size: int) -> dict[str, float]:
    """Seconds per sequence pushed and per sample; bytes per env step covered."""
    start = time.process_time()
    pushed = 0
    for batch in batches:
        buffer.push(batch)
        pushed += len(batch)
    insert = (time.process_time() - start) / pushed
    for _ in range(10):
        buffer.sample(batch_size)
    start = time.process_time()
    for _ in range(samples):
        buffer.sample(batch_size)
    sample = (time.process_time() - start) / samples
    return {
        "insert": insert,
        "sample": sample,
        "bytes_per_step": buffer.nbytes / buffer.capacity / PERIOD,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capacity", type=int, default=10_000, help="sequences held")
    parser.add_argument("--envs", type=int, default=16)
    parser.add_argument("--batch", type=int, default=32, help="sequences a sample")
    parser.add_argument("--samples", type=int, default=300)
    args = parser.parse_args()
    print(
        f"{platform.node()} ({platform.processor() or platform.machine()}), {datetime.date.today()}"
    )
    result: dict[str, float | str] = {
        "date": str(datetime.date.today()),
        "machine": platform.machine(),
    }
    for kind in SHAPES:
        batches = sequences(kind, args.envs, 2 * args.capacity)  # the buffers wrap
        old = measure(SequenceReplayBuffer(args.capacity, 0), batches, args.samples, args.batch)
        new = measure(
            SequenceReplayBuffer(args.capacity, 0, steps_per_sequence=PERIOD + 1),
            batches,
            args.samples,
            args.batch,
        )
        print(f"\n{kind} observations {SHAPES[kind][0]}, {args.capacity:,} sequences of T = 29")
        print(f"{'':>16} | {'whole sequences':>16} | {'steps once':>16} | ratio")
        for name, unit, scale in (
            ("bytes_per_step", "B", 1),
            ("insert", "us/seq", 1e6),
            ("sample", "us/batch", 1e6),
        ):
            ratio = new[name] / old[name]
            print(
                f"{name:>16} | {old[name] * scale:>9.1f} {unit:<6} | {new[name] * scale:>9.1f}"
                f" {unit:<6} | {ratio:.2f}x"
            )
            result[f"{kind}_{name}_old"] = round(old[name] * scale, 2)
            result[f"{kind}_{name}_new"] = round(new[name] * scale, 2)
            result[f"{kind}_{name}_ratio"] = round(ratio, 3)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
