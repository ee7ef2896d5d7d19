"""The learner's opt step of the Pong recipe on a GPU, split into its parts.

Builds the learner's agent and replay buffer of ``experiment=dqn_pong_async`` from the shipped
config (dueling double DQN, Nature CNN, batch 64; prioritized replay storing each frame once,
``--capacity`` rows, by default the recipe's 1M) on ``--device`` (cuda), fills ``--fill`` rows
with synthetic 84x84 frames (episodes of ``EPISODE`` steps, actor priorities), and prints:

1. the bare learn loop: opt steps/s of ``trainers.loop.learn_step`` (sample, update, priority
   update: what the learner does per opt step, without actors);
2. the same steps timed part by part, in ms per opt step and as shares of their sum:
   ``sample`` (CPU: draw from the sum tree, rebuild the stacks), ``h2d`` (``TensorBatch.of``:
   the host-to-device copy of the batch, synchronized), ``update`` (the agent's update on the
   copied batch, up to its ``td_error`` back on the host), ``priorities`` (``update_priorities``);
3. the host-to-device copy alone, pageable (what ``TensorBatch.of`` does) against pinned (the
   sampled arrays copied into preallocated page-locked buffers, then ``non_blocking`` copies),
   on the same batches, alternated, as a ratio; the copied tensors are checked equal;
4. with ``--profile``, the GPU's kernel time per opt step from ``torch.profiler``, against the
   wall time of the step (how busy the update keeps the GPU).

The learner runs with one torch thread, as in ``border train``. So far it has run on CPU only
(``--device cpu``, a smoke test): no GPU machine was lent when it was written, so its pinned-copy
and profiler parts (CUDA only) are unmeasured.

    python benchmarks/cuda_learner.py [--device cuda] [--capacity 1000000] [--fill 200000] \
        [--steps 2000] [--profile] [--cudnn-benchmark]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import torch
from hydra import compose, initialize_config_dir

import border_py.agents.dqn as dqn_module
from border_py.agents.batch import TensorBatch
from border_py.agents.factory import build_agent
from border_py.config import build, config_dir
from border_py.overrides import to_plain
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.trainers.loop import learn_step
from border_py.transitions import FrameChunk, Transitions

SIDE, STACK, ACTIONS, EPISODE = 84, 4, 6, 850  # Pong: 6 actions; an episode of an early policy
POOL = 4096  # distinct random frames the synthetic stream cycles through


def load_config(device: str, capacity: int) -> dict:
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        return to_plain(
            compose(
                "train",
                overrides=[
                    "experiment=dqn_pong_async",
                    f"device={device}",
                    f"replay_buffer.capacity={capacity}",
                    "replay_buffer.seed=0",
                ],
            )
        )


def pong_rows(first: int, n: int, pool: np.ndarray, rng: np.random.Generator) -> Transitions:
    """``n`` new frames (ids ``first..``) of one stream, episodes of ``EPISODE`` steps, one
    transition ending at each, with the actors' initial priorities."""
    ids = first + np.arange(n, dtype=np.int64)
    prev = np.where(ids % EPISODE == 0, ids, ids - 1)  # a reset frame pads with itself
    batch = Transitions(
        prev,
        rng.integers(0, ACTIONS, n),
        rng.choice(np.array([-1.0, 0.0, 1.0], np.float32), n, p=[0.01, 0.98, 0.01]),
        ids,
        np.where(ids % EPISODE == EPISODE - 1, 0.0, 0.99**3).astype(np.float32),
    )
    batch.priority = rng.exponential(0.05, n).astype(np.float32)
    batch.frames = FrameChunk(0, first, pool[ids % len(pool)], prev, max(first - 1, 0))
    return batch


def fill(buffer: PrioritizedReplayBuffer, total: int, chunk: int = 10_000) -> float:
    rng = np.random.default_rng(0)
    pool = rng.integers(0, 256, size=(POOL, SIDE, SIDE), dtype=np.uint8)
    start, done = time.perf_counter(), 0
    while done < total:
        n = min(chunk, total - done)
        buffer.push(pong_rows(done, n, pool, rng))
        done += n
    return time.perf_counter() - start


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def preconverted(batch: TensorBatch) -> Iterator[None]:
    """Make the agent's ``TensorBatch.of`` return ``batch`` (already on the device), so that its
    update is timed without the copy."""

    class Converted(TensorBatch):
        @classmethod
        def of(cls, *args, **kwargs) -> TensorBatch:
            return batch

    dqn_module.TensorBatch = Converted
    try:
        yield
    finally:
        dqn_module.TensorBatch = TensorBatch


def bare_loop(agent, buffer, steps: int, device: torch.device) -> float:
    """Opt steps/s of ``learn_step`` (the learner's own call)."""
    sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        learn_step(agent, buffer)
    sync(device)
    return steps / (time.perf_counter() - start)


def parts_loop(agent, buffer, steps: int, device: torch.device) -> dict[str, list[float]]:
    """Seconds of each part of ``learn_step``, per step (the same work, in the same order)."""
    times: dict[str, list[float]] = {"sample": [], "h2d": [], "update": [], "priorities": []}
    sync(device)
    for _ in range(steps):
        t0 = time.perf_counter()
        batch = buffer.sample(agent.batch_size)
        t1 = time.perf_counter()
        tensors = TensorBatch.of(batch, device, discrete=True)
        sync(device)
        t2 = time.perf_counter()
        with preconverted(tensors):
            metrics = agent.update(batch)
        td_error = metrics.pop("td_error")  # on the host: the update's work is done
        sync(device)
        t3 = time.perf_counter()
        buffer.update_priorities(batch.index, np.asarray(td_error))
        t4 = time.perf_counter()
        for key, seconds in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            times[key].append(seconds)
    return times


class PinnedCopy:
    """The batch's arrays copied into preallocated page-locked host buffers, then to the device
    with ``non_blocking`` copies (one synchronization at the end, by the caller)."""

    def __init__(self, batch: Transitions, device: torch.device) -> None:
        self.device = device
        self.host = {
            name: torch.empty(np.shape(value), dtype=dtype, pin_memory=True)
            for name, value, dtype in self.fields(batch)
        }

    @staticmethod
    def fields(batch: Transitions):
        assert batch.weight is not None
        return (
            ("obs", batch.obs, torch.uint8),
            ("action", batch.action, torch.int64),
            ("reward", batch.reward, torch.float32),
            ("next_obs", batch.next_obs, torch.uint8),
            ("discount", batch.discount, torch.float32),
            ("weight", batch.weight, torch.float32),
        )

    def __call__(self, batch: Transitions) -> TensorBatch:
        out = {}
        for name, value, _ in self.fields(batch):
            host = self.host[name].numpy()  # a view of the pinned buffer
            host[...] = value
            out[name] = self.host[name].to(self.device, non_blocking=True)
        return TensorBatch(**out)


def h2d_compare(
    buffer: PrioritizedReplayBuffer, batch_size: int, steps: int, device: torch.device
) -> tuple[float, float, int]:
    """Median seconds of the pageable and the pinned copy of the same batches, and the bytes."""
    batches = [buffer.sample(batch_size) for _ in range(steps)]
    pinned_copy = PinnedCopy(batches[0], device)
    pageable, pinned = [], []
    for batch in batches:
        sync(device)
        t0 = time.perf_counter()
        a = TensorBatch.of(batch, device, discrete=True)
        sync(device)
        t1 = time.perf_counter()
        b = pinned_copy(batch)
        sync(device)
        t2 = time.perf_counter()
        pageable.append(t1 - t0)
        pinned.append(t2 - t1)
        for name in ("obs", "action", "reward", "next_obs", "discount", "weight"):
            if not torch.equal(getattr(a, name), getattr(b, name)):
                raise AssertionError(f"the pinned copy of {name} differs")
    nbytes = sum(np.asarray(v).nbytes for _, v, _ in PinnedCopy.fields(batches[0]))
    return statistics.median(pageable), statistics.median(pinned), nbytes


def profile_gpu(agent, buffer, steps: int, device: torch.device) -> tuple[float, float]:
    """(GPU kernel ms, wall ms) per opt step of ``learn_step``, from ``torch.profiler``."""
    from torch.profiler import ProfilerActivity, profile

    sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            learn_step(agent, buffer)
        sync(device)
        wall = time.perf_counter() - start
    kernel_us = 0.0
    for event in prof.events():
        if str(getattr(event, "device_type", "")).endswith("CUDA"):
            kernel_us += getattr(event, "self_device_time_total", 0.0)
    return kernel_us / 1e3 / steps, wall * 1e3 / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--fill", type=int, default=200_000)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--profile", action="store_true", help="GPU kernel time per opt step")
    parser.add_argument(
        "--cudnn-benchmark", action="store_true", help="torch.backends.cudnn.benchmark=True"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in border train's learner
    torch.backends.cudnn.benchmark = args.cudnn_benchmark
    device = torch.device(args.device)
    config = load_config(args.device, args.capacity)
    obs_space = gym.spaces.Box(0, 255, (STACK, SIDE, SIDE), np.uint8)
    agent = build_agent(config, (obs_space, gym.spaces.Discrete(ACTIONS)), args.device)
    buffer = build("replay_buffer", config["replay_buffer"])
    assert isinstance(buffer, PrioritizedReplayBuffer)
    seconds = fill(buffer, args.fill)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(
        f"device {name}, torch {torch.__version__}, cudnn.benchmark={args.cudnn_benchmark};"
        f" agent {type(agent).__name__} batch {agent.batch_size}; prioritized replay"
        f" {len(buffer):,} of {buffer.capacity:,} rows (filled in {seconds:.1f} s)"
    )

    for _ in range(args.warmup):
        learn_step(agent, buffer)
    rate = bare_loop(agent, buffer, args.steps, device)
    print(f"\n1. bare learn loop: {rate:,.0f} opt steps/s ({1e3 / rate:.2f} ms per opt step)")

    times = parts_loop(agent, buffer, args.steps, device)
    means = {key: statistics.fmean(values) for key, values in times.items()}
    total = sum(means.values())
    print(f"\n2. one opt step, part by part (mean of {args.steps}; sum {total * 1e3:.2f} ms):")
    print(f"   {'part':>10} | {'mean ms':>8} | {'median ms':>9} | {'share':>6}")
    for key, values in times.items():
        print(
            f"   {key:>10} | {means[key] * 1e3:>8.3f} | {statistics.median(values) * 1e3:>9.3f} |"
            f" {means[key] / total:>6.1%}"
        )
    print(f"   parts' sum vs bare loop: {total * rate:.2f}x")

    if device.type == "cuda":
        pageable, pinned, nbytes = h2d_compare(buffer, agent.batch_size, 500, device)
        print(
            f"\n3. host-to-device copy of one batch ({nbytes / 2**20:.2f} MiB), median of 500:"
            f" pageable {pageable * 1e3:.3f} ms ({nbytes / pageable / 1e9:.1f} GB/s), pinned"
            f" (host copy + non_blocking) {pinned * 1e3:.3f} ms ({nbytes / pinned / 1e9:.1f}"
            f" GB/s): {pinned / pageable:.2f}x; tensors equal"
        )
        print(
            f"   pinning would save {(pageable - pinned) * 1e3:.3f} ms of {total * 1e3:.2f} ms"
            f" per opt step ({(pageable - pinned) / total:.1%})"
        )
        print(
            f"   GPU memory: {torch.cuda.max_memory_allocated(device) / 2**20:.0f} MiB allocated"
            f" at most, {torch.cuda.max_memory_reserved(device) / 2**20:.0f} MiB reserved"
        )

    if args.profile and device.type == "cuda":
        try:
            kernel_ms, wall_ms = profile_gpu(agent, buffer, 200, device)
        except Exception as exc:  # the profiler needs CUPTI; report and go on
            print(f"\n4. profiler failed: {exc!r}")
        else:
            print(
                f"\n4. GPU kernel time {kernel_ms:.3f} ms per opt step of {wall_ms:.3f} ms wall"
                f" (under the profiler): the GPU computes {kernel_ms / wall_ms:.0%} of the step"
            )


if __name__ == "__main__":
    main()
