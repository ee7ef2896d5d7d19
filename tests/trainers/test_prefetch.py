"""The learner's prefetch (trainers/prefetch.py): staleness bounds, priorities on the right rows,
the thread's end, and the agents' tensor entry point equal to their update; sequences (R2D2) too."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py import train
from border_py.agents.batch import TensorBatch
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.agents.r2d2 import R2D2
from border_py.agents.sac import SAC
from border_py.agents.sequence_batch import SequenceBatch
from border_py.errors import RunError
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.replay.sequence_prioritized import PrioritizedSequenceReplayBuffer
from border_py.sequences import Sequences
from border_py.trainers.prefetch import Prefetcher, PrefetchError, build_prefetcher
from border_py.transitions import Transitions

from ..agents.sequence_data import random_sequences
from ..conftest import FEW_FRESH_EVALS, make_config

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(2)
NEVER = lambda: False  # noqa: E731 (no stop requested)


def transitions(n: int, seed: int, continuous: bool = False) -> Transitions:
    rng = np.random.default_rng(seed)
    action = rng.uniform(-1, 1, (n, 1)).astype(np.float32) if continuous else rng.integers(0, 2, n)
    return Transitions(
        obs=rng.standard_normal((n, 4)).astype(np.float32),
        action=action,
        reward=rng.standard_normal(n).astype(np.float32),
        next_obs=rng.standard_normal((n, 4)).astype(np.float32),
        discount=np.full(n, 0.99, np.float32),
    )


def dqn(**keys: Any) -> DQN:
    return DQN(OBS, ACTIONS, seed=1, hidden_sizes=[16], batch_size=8, **keys)


class Recording(PrioritizedReplayBuffer):
    """The real buffer, noting the order of its samples and priority write-backs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[str] = []
        self.prefetcher: Prefetcher | None = None
        self.written_during: list[int] = []  # the prefetcher's opt step at each write-back

    def sample(self, batch_size: int) -> Transitions:
        self.events.append("S")
        return super().sample(batch_size)

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        self.events.append("P")
        assert self.prefetcher is not None
        self.written_during.append(self.prefetcher.taken)
        super().update_priorities(index, td_error)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_batches_at_most_depth_steps_early_priorities_one_step_late(depth):
    buffer = Recording(capacity=256, seed=0)
    buffer.push(transitions(256, 0))
    prefetcher = Prefetcher(dqn(), buffer, depth)
    buffer.prefetcher = prefetcher
    early, steps = [], 30
    try:
        for step in range(steps):
            with prefetcher.lock:  # the loop's ingest between opt steps
                buffer.push(transitions(4, 100 + step))
            prefetcher.learn()
            early.append(prefetcher.early)
    finally:
        prefetcher.close(flush=True)
    assert max(early) <= depth and min(early) >= 0
    # step t's priorities are written once, after its update and by the end of step t + 1 (the
    # last one at close: after step 30), before the thread samples step t + depth + 1's batch
    written = buffer.written_during
    assert len(written) == steps and written[-1] == steps
    assert all(t <= w <= t + 1 for t, w in enumerate(written, start=1)), written
    samples = [i for i, e in enumerate(buffer.events) if e == "S"]  # the k-th: step k's batch
    writes = [i for i, e in enumerate(buffer.events) if e == "P"]  # the t-th: step t's
    for t, at in enumerate(writes, start=1):
        if t + depth < len(samples):
            assert at < samples[t + depth], (
                f"step {t}'s priorities after step {t + depth + 1}'s sample"
            )


class WaitsForTheThread(DQN):
    """DQN whose update, from the second step on, waits (1 s at most) until the previous step's
    priorities are written: the write-back overlaps it, or the wait times out."""

    def __init__(self, written: threading.Event, **keys: Any) -> None:
        super().__init__(OBS, ACTIONS, seed=1, hidden_sizes=[16], batch_size=8, **keys)
        self.written = written

    def update_tensors(self, batch: TensorBatch) -> dict[str, Any]:
        if self.opt_steps > 0:
            self.written.wait(1.0)
            self.written.clear()
        return super().update_tensors(batch)


class WrittenBy(PrioritizedReplayBuffer):
    """The real buffer, noting which thread writes each step's priorities back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.written, self.writers = threading.Event(), []

    def update_priorities(self, index: np.ndarray, td_error: np.ndarray) -> None:
        self.writers.append(threading.current_thread().name)
        super().update_priorities(index, td_error)
        self.written.set()


@pytest.mark.parametrize("depth", [1, 2])
def test_the_thread_writes_priorities_back_while_the_next_update_runs(depth):
    buffer = WrittenBy(capacity=64, seed=0)
    buffer.push(transitions(64, 0))
    prefetcher = Prefetcher(WaitsForTheThread(buffer.written), buffer, depth)
    try:
        for _ in range(4):
            prefetcher.learn()
    finally:
        prefetcher.close(flush=True)
    # steps 1-3's during steps 2-4's updates, by the thread; step 4's at close
    assert buffer.writers == ["border-prefetch"] * 3 + ["MainThread"]


class Diverges(DQN):
    def update_tensors(self, batch: TensorBatch) -> dict[str, Any]:
        metrics = super().update_tensors(batch)
        metrics["td_error"] = torch.full_like(metrics["td_error"], float("nan"))
        return metrics


def test_non_finite_td_errors_are_the_one_line_error_they_are_without_prefetch():
    buffer = PrioritizedReplayBuffer(capacity=64, seed=0)
    buffer.push(transitions(64, 0))
    prefetcher = Prefetcher(Diverges(OBS, ACTIONS, seed=1, hidden_sizes=[16]), buffer, 1)
    try:
        with pytest.raises(RunError, match="non-finite TD errors"):
            for _ in range(5):
                prefetcher.learn()
    finally:
        prefetcher.close(flush=False)


@contextlib.contextmanager
def held(prefetcher: Prefetcher) -> Iterator[None]:
    """The buffer's lock held (once the thread has a batch ready): the thread cannot write the
    priorities back, so the step's stay pending for the test to look at."""
    if prefetcher._thread is None:
        prefetcher._start()
    deadline = time.monotonic() + 10.0
    while prefetcher._queue.empty() and time.monotonic() < deadline:
        time.sleep(0.001)
    with prefetcher.lock:
        yield


class KeepsTD(DQN):
    """DQN noting the TD errors its updates return."""

    def update_tensors(self, batch: TensorBatch) -> dict[str, Any]:
        metrics = super().update_tensors(batch)
        self.td = metrics["td_error"].clone()
        return metrics


def test_priorities_land_on_their_rows_and_skip_rows_overwritten_since():
    buffer = PrioritizedReplayBuffer(capacity=64, seed=0, alpha=0.5)
    buffer.push(transitions(64, 0))
    agent = KeepsTD(OBS, ACTIONS, seed=1, hidden_sizes=[16], batch_size=32)
    prefetcher = Prefetcher(agent, buffer, 1)
    try:
        with held(prefetcher):
            prefetcher.learn()  # step 1: its TD errors pending
            pending = prefetcher._pending
            assert pending is not None
            index, td = pending.index.copy(), agent.td.numpy().astype(np.float64)
            buffer.push(transitions(20, 1))  # overwrites rows 0..19
            prio = buffer.prioritization
            fresh = prio.max_priority**prio.alpha
            prefetcher.flush()
    finally:
        prefetcher.close(flush=False)
    priorities = buffer.priorities()
    last = {row: k for k, row in enumerate(index)}  # a row drawn twice keeps its last value
    for row, k in last.items():
        want = fresh if row < 20 else (abs(td[k]) + prio.eps) ** prio.alpha
        assert priorities[row] == pytest.approx(want, rel=1e-6), row
    assert any(row < 20 for row in last) and any(row >= 20 for row in last)


def test_overwritten_matches_a_per_row_stamp():
    buffer = PrioritizedReplayBuffer(capacity=50, seed=0)
    stamp = np.full(50, -1)
    rng = np.random.default_rng(0)
    for _ in range(40):
        since, before = buffer.rows_written, stamp.copy()
        for _ in range(rng.integers(0, 3)):
            n = int(rng.integers(1, 40))
            start = buffer.rows_written
            buffer.push(transitions(n, int(rng.integers(1 << 30))))
            kept = min(n, 50)
            stamp[(start + n - kept + np.arange(kept)) % 50] = buffer.rows_written  # rows written
        rows = np.arange(50)
        assert (buffer.overwritten(rows, since) == (stamp != before)).all()


class Failing(PrioritizedReplayBuffer):
    def sample(self, batch_size: int) -> Transitions:
        raise ValueError("the sum tree broke")


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "border-prefetch"]


def test_a_failure_in_the_thread_surfaces_in_the_learner_and_no_thread_is_left():
    buffer = Failing(capacity=64, seed=0)
    buffer.push(transitions(64, 0))
    prefetcher = Prefetcher(dqn(), buffer, 2)
    with pytest.raises(PrefetchError, match="the sum tree broke") as raised:
        prefetcher.learn()
    assert isinstance(raised.value.__cause__, ValueError)
    prefetcher.close(flush=False)
    assert prefetch_threads() == []


class Slow(PrioritizedReplayBuffer):
    def sample(self, batch_size: int) -> Transitions:
        time.sleep(1.5)  # a starved thread (a loaded machine, a huge batch)
        return super().sample(batch_size)


def test_a_stop_request_ends_the_wait_for_a_batch_without_a_step():
    buffer = Slow(capacity=64, seed=0)
    buffer.push(transitions(64, 0))
    stop = threading.Event()
    agent = dqn()
    prefetcher = Prefetcher(agent, buffer, 1, stop.is_set)
    threading.Timer(0.2, stop.set).start()
    began = time.monotonic()
    assert prefetcher.learn() is None
    assert time.monotonic() - began < 1.0 and agent.opt_steps == 0
    prefetcher.close(flush=False)


def test_a_run_with_prefetch_leaves_no_thread(tmp_path):
    summary = train(
        make_config(
            tmp_path,
            "trainer=serial",
            "replay_buffer=prioritized",
            "agent.hidden_sizes=[16]",
            "trainer.warmup_period=100",
            "trainer.max_opts=60",
            "trainer.eval_interval=60",
            "trainer.eval_episodes=1",
            "trainer.prefetch=2",
            "progress=false",
        )
    )
    assert summary["opt_steps"] == 60
    assert prefetch_threads() == []


class OnlyUpdate:
    """A user's agent with ``update(Transitions)`` only."""

    batch_size = 8


def test_an_agent_without_update_tensors_trains_without_prefetch(caplog):
    buffer = PrioritizedReplayBuffer(capacity=64, seed=0)
    with caplog.at_level("INFO"):
        assert build_prefetcher(2, OnlyUpdate(), buffer, NEVER) is None  # type: ignore[arg-type]
    assert "no update_tensors" in caplog.text
    assert build_prefetcher(0, dqn(), buffer, NEVER) is None
    assert isinstance(build_prefetcher(1, dqn(), buffer, NEVER), Prefetcher)


def agents() -> list[tuple[Any, Any, bool]]:
    box = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    return [
        (dqn(), dqn(), False),
        (
            IQN(OBS, ACTIONS, seed=1, hidden_sizes=[16], batch_size=8),
            IQN(OBS, ACTIONS, seed=1, hidden_sizes=[16], batch_size=8),
            False,
        ),
        (
            SAC(OBS, box, seed=1, hidden_sizes=[16], batch_size=8),
            SAC(OBS, box, seed=1, hidden_sizes=[16], batch_size=8),
            True,
        ),
    ]


@pytest.mark.parametrize("pair", agents(), ids=["dqn", "iqn", "sac"])
def test_update_tensors_makes_update_bit_for_bit(pair):
    a, b, continuous = pair
    for step in range(3):
        batch = transitions(8, step, continuous)
        batch.index, batch.weight = np.arange(8), np.linspace(0.5, 1, 8).astype(np.float32)
        want = a.update(batch)
        got = b.update_tensors(TensorBatch.of(batch, b.device, b.discrete_actions))
        if "td_error" in want:
            assert np.array_equal(want["td_error"], got["td_error"].numpy())
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        if isinstance(x, dict):
            for key in x:
                if isinstance(x[key], torch.Tensor):
                    assert torch.equal(x[key], y[key]), key


@pytest.mark.slow
def test_serial_dqn_solves_cartpole_with_prefetch(tmp_path):
    summary = train(
        make_config(
            tmp_path,
            "seed=0",
            "trainer=serial",
            "trainer.prefetch=2",
            "trainer.target_return=475",
            "trainer.max_opts=25000",
            FEW_FRESH_EVALS,
        )
    )
    assert summary["best_return"] >= 475, summary
    assert summary["solved_at"] is not None


# -- sequences (R2D2): the prefetch converts them to a SequenceBatch ---------------------------


def r2d2(cls: type[R2D2] = R2D2, **keys: Any) -> R2D2:
    small = {"hidden_sizes": [8], "core_size": 8, "burn_in": 3, "length": 4, "n_step": 2}
    return cls(gym.spaces.Box(-5.0, 5.0, (3,), np.float32), ACTIONS, seed=1, **small, **keys)


def sequences(n: int, seed: int) -> Sequences:
    rows = [[(0, None), (3, None), (2, 6), (3, 4)][k % 4] for k in range(n)]
    return random_sequences(rows, 3, 4, 2, n_actions=2, seed=seed)


class KeepsPriority(R2D2):
    """R2D2 noting the priorities its updates return."""

    def update_tensors(self, batch: SequenceBatch) -> dict[str, Any]:
        metrics = super().update_tensors(batch)
        self.td = metrics["td_error"].clone()
        return metrics


def test_r2d2_update_tensors_makes_update_bit_for_bit():
    a, b = r2d2(), r2d2()
    for step in range(3):
        batch = sequences(8, step)
        batch.index, batch.weight = np.arange(8), np.linspace(0.5, 1, 8).astype(np.float32)
        want = a.update(batch)
        got = b.update_tensors(SequenceBatch.of(batch, b.device))
        assert np.array_equal(want["td_error"], got["td_error"].numpy())
        assert float(want["train/loss"]) == float(got["train/loss"])
        assert float(want["train/q_mean"]) == float(got["train/q_mean"])
    for x, y in zip(a.q.state_dict().values(), b.q.state_dict().values(), strict=True):
        assert torch.equal(x, y)


def test_r2d2_learns_through_the_prefetch_with_its_priorities_on_their_rows():
    buffer = PrioritizedSequenceReplayBuffer(capacity=64, seed=0, alpha=0.5)
    buffer.push(sequences(64, 0))
    agent = r2d2(KeepsPriority, batch_size=16)
    assert isinstance(agent, KeepsPriority)
    prefetcher = build_prefetcher(2, agent, buffer, NEVER)
    assert isinstance(prefetcher, Prefetcher)  # before: "no update_tensors", no prefetch
    try:
        for step in range(5):
            with prefetcher.lock:
                buffer.push(sequences(2, 10 + step))
            if step < 4:
                metrics = prefetcher.learn()
                assert metrics is not None and "td_error" not in metrics
        with held(prefetcher):  # step 5's priorities stay pending
            metrics = prefetcher.learn()
            assert metrics is not None and "td_error" not in metrics
            pending = prefetcher._pending
            assert pending is not None and agent.opt_steps == 5
            index, td = pending.index.copy(), agent.td.numpy().astype(np.float64)
            prefetcher.flush()
    finally:
        prefetcher.close(flush=False)
    assert prefetch_threads() == []
    priorities = buffer.priorities()
    last = {row: k for k, row in enumerate(index)}  # a row drawn twice keeps its last value
    for row, k in last.items():
        if not buffer.overwritten(np.array([row]), pending.mark)[0]:
            want = (td[k] + buffer.prioritization.eps) ** buffer.prioritization.alpha
            assert priorities[row] == pytest.approx(want, rel=1e-6)
