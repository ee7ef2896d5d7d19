"""Sequence replay stores each env step once: built from real episodes (the sequence builder's),
checked against the sequences as pushed (what the whole-sequence layout returned), across
evictions, wraps, priority updates and checkpoints."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from border_py.actors.sampler import Sampler, SampleStats
from border_py.actors.sequencer import SequenceBuilder
from border_py.envs.vector import VectorStep
from border_py.errors import ConfigError
from border_py.overrides import to_plain
from border_py.replay.sequence_prioritized import PrioritizedSequenceReplayBuffer
from border_py.replay.sequence_replay import SequenceReplayBuffer
from border_py.runs.settings import RunSettings
from border_py.sequences import STORED_SEQUENCE, Sequences
from border_py.trainers.components import build_components, checkpoint_nbytes, replay_nbytes

B, L, PERIOD, N = 3, 4, 2, 2  # T = 9
SHAPE = (10, 10, 4)  # MinAtar's observations, as uint8 here


def frame(env: int, episode: int, u: int) -> np.ndarray:
    """A pixel observation that names its env, episode and episode step."""
    return np.full(SHAPE, (env * 53 + episode * 7 + u) % 251 + 1, np.uint8)


def episodes(n_envs: int, lengths: list[list[int]], seed: int = 0):
    """Yield ``(batch, key, distinct)`` per take of a builder over ``n_envs`` envs, env ``e``'s
    episodes lasting ``lengths[e]`` steps (its last one goes on): ``key`` the keys the builder
    cut (stream = env, episode = the env's episode count, start = s) and ``distinct`` the set of
    ``(stream, episode, episode step)`` the batch's present indices hold."""
    rng = np.random.default_rng(seed)
    builder = SequenceBuilder(n_envs, B, L, PERIOD, N, 0.9, (2, 3))
    episode = np.zeros(n_envs, int)
    u = np.zeros(n_envs, int)
    for _ in range(max(sum(x) for x in lengths)):
        ends = np.array(
            [u[e] == lengths[e][min(episode[e], len(lengths[e]) - 1)] - 1 for e in range(n_envs)]
        )
        ends &= np.array([episode[e] < len(lengths[e]) - 1 for e in range(n_envs)])
        obs = np.stack([frame(e, episode[e], u[e]) for e in range(n_envs)])
        nxt = np.stack([frame(e, episode[e], u[e] + 1) for e in range(n_envs)])
        terminated = ends & (rng.random(n_envs) < 0.5)
        step = VectorStep(
            nxt, nxt, rng.random(n_envs).astype(np.float32), terminated, ends & ~terminated, [], []
        )
        state = rng.random((n_envs, 2, 3)).astype(np.float32)
        builder.add(obs, state, rng.integers(0, 3, n_envs), step)
        u = np.where(ends, 0, u + 1)
        episode += ends
        batch = builder.take()
        if batch is None:
            continue
        key = batch.key
        assert key is not None and key.dtype == np.int64
        for (env, ep, start), obs in zip(key, batch.obs[:, B], strict=True):  # the keys name
            assert (obs == frame(env, ep, start)).all()  # the steps: their env, episode, step
        distinct = {
            (k[0], k[1], k[2] - B + t)
            for k, present in zip(key, batch.present, strict=True)
            for t in np.flatnonzero(present)
        }
        yield batch, key, distinct


def same(a: Sequences, b: Sequences) -> None:
    for name in STORED_SEQUENCE:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.burn_in == b.burn_in


LENGTHS = [[1, 7, 30, 2], [13, 3, 40], [25, 25]]  # short, long and ending episodes, 3 envs


def test_each_step_is_stored_once_and_samples_equal_the_sequences_pushed():
    buf = SequenceReplayBuffer(capacity=1000, seed=4, steps_per_sequence=B + L + N)
    pushed, distinct = [], set()
    for batch, key, steps in episodes(3, LENGTHS):
        buf.push(batch, key)
        pushed.append(batch)
        distinct |= steps
    whole = Sequences.concat(pushed)
    store = buf.store
    assert len(buf) == len(whole) > 30
    # one copy per env step: the ring holds exactly the distinct steps the sequences use
    assert store.written == len(distinct)
    per_step = np.prod(SHAPE)
    assert store.step_arrays["obs"][: store.written].nbytes == len(distinct) * per_step
    assert len(whole) * whole.steps > 3 * len(distinct)  # what storing whole sequences takes
    # every row reads back as pushed: observations, padding, masks, states, targets
    same(store.gather(np.arange(len(whole))), whole)
    # and a sample is what the whole-sequence layout drew: the same rows for the same seed
    draws = np.random.default_rng(4).integers(0, len(whole), 64)
    same(buf.sample(64), Sequences(**{k: v[draws] for k, v in whole.arrays().items()}, burn_in=B))


@pytest.mark.parametrize("buffer_class", [SequenceReplayBuffer, PrioritizedSequenceReplayBuffer])
def test_the_ring_samples_what_sequences_stored_whole_sample_across_wraps(buffer_class):
    whole = buffer_class(capacity=25, seed=6)  # the layout before: each sequence whole
    ring = buffer_class(capacity=25, seed=6, steps_per_sequence=B + L + N)
    for i, (batch, key, _) in enumerate(episodes(3, [[9, 30, 4, 17, 60], [5] * 30, [120]])):
        whole.push(batch, key)
        ring.push(batch, key)
        if i % 5 == 4:
            a, b = whole.sample(16), ring.sample(16)
            same(a, b)
            np.testing.assert_array_equal(a.index, b.index)
            if a.index is not None:
                whole.update_priorities(a.index, a.ret[:, 0])
                ring.update_priorities(b.index, b.ret[:, 0])
                np.testing.assert_array_equal(a.weight, b.weight)
    assert ring.rows_written > 4 * 25 and ring.store.written < whole.rows_written * (B + L + N) / 2


def test_without_keys_or_from_a_restarted_stream_nothing_is_shared():
    plain = SequenceReplayBuffer(capacity=1000, seed=0, steps_per_sequence=B + L + N)
    keyed = SequenceReplayBuffer(capacity=1000, seed=0, steps_per_sequence=B + L + N)
    for batch, _, _ in episodes(1, [[40]]):
        plain.push(replace(batch, key=None))  # sequences without their keys
        keyed.push(batch)  # their own keys
    present = int(plain.store.gather(np.arange(len(plain))).present.sum())
    assert plain.store.written == present > 2 * keyed.store.written
    same(plain.store.gather(np.arange(len(plain))), keyed.store.gather(np.arange(len(keyed))))
    # an actor restarted afresh reuses its stream ids and keys: after a stream that sent its
    # first windows, the restarted one's first batch holds windows past them, and shares nothing
    short = SequenceReplayBuffer(capacity=1000, seed=0, steps_per_sequence=B + L + N)
    takes = list(episodes(1, [[40]]))
    for batch, key, _ in takes[:2]:
        short.push(batch, key)
    written = short.store.written
    batch = Sequences.concat([b for b, _, _ in takes[:6]])
    batch.obs = np.where(batch.present[..., None, None, None], batch.obs + 1, 0)  # other frames
    short.push(batch, np.concatenate([k for _, k, _ in takes[:6]]))
    assert short.store.written == written + len(set().union(*(d for _, _, d in takes[:6])))
    same(short.store.gather(np.arange(2, 8)), batch)  # none of the earlier stream's frames
    with pytest.raises(ValueError, match=r"sequence keys of shape \(6, 2\), expected \(6, 3\)"):
        keyed.push(batch, np.zeros((len(batch), 2)))


def test_rows_whose_steps_are_overwritten_leave_first_in_first_out_across_wraps(caplog):
    # a ring of 1 step a sequence: fewer than the new steps each sequence brings, so the ring
    # laps many times and overwrites steps of rows still held
    buf = PrioritizedSequenceReplayBuffer(capacity=40, seed=1, steps_per_sequence=1)
    sent: dict[int, Sequences] = {}  # row number -> the sequence pushed
    evicted_early = 0
    for batch, key, _ in episodes(3, [[9, 30, 4, 17, 60], [5] * 30, [120]], seed=3):
        store = buf.store
        before = (store.rows_written, store.size) if store else (0, 0)
        buf.push(batch, key)
        store = buf.store
        for i in range(len(batch)):
            sent[before[0] + i] = Sequences(
                **{k: v[i : i + 1] for k, v in batch.arrays().items()}, burn_in=B
            )
        if before[1] + len(batch) - store.size > max(before[1] + len(batch) - 40, 0):
            evicted_early += 1
        held = np.arange(store.rows_written - store.size, store.rows_written)  # a FIFO suffix
        ids = store.step_ids(held % 40)
        assert (ids[ids >= 0] >= store.first_live).all()  # never a step overwritten
        same(store.gather(held % 40), Sequences.concat([sent[r] for r in held]))
        gone = np.setdiff1d(np.arange(40), held % 40)
        assert (buf.priorities()[gone[gone < len(buf.priorities())]] == 0).all()
    assert buf.store.written > 3 * buf.store.ring and evicted_early > 5, evicted_early
    warned = [r.message for r in caplog.records if "left early" in r.message]
    assert len(warned) == 1 and "steps_per_sequence=1: the ring" in warned[0]  # said once


def test_priority_updates_after_an_eviction_leave_the_rows_that_left_alone():
    buf = PrioritizedSequenceReplayBuffer(capacity=40, seed=2, steps_per_sequence=1, alpha=1.0)
    stream = episodes(2, [[200], [200]], seed=5)
    while len(buf) < 12:
        buf.push(*next(stream)[:2])
    sample = buf.sample(16)
    mark = buf.rows_written
    while not (~buf.store.live(sample.index)).any():
        buf.push(*next(stream)[:2])
    left = ~buf.store.live(sample.index)
    gone = buf.overwritten(sample.index, mark)
    assert gone[left].all()
    buf.update_priorities(sample.index, np.full(16, 50.0))
    p = buf.prioritization.sums.leaves(sample.index)
    assert (p[left] == 0).all() and (p[~left] == pytest.approx(50.0 + buf.prioritization.eps))
    for _ in range(50):
        assert buf.store.live(buf.sample(32).index).all()  # the rows that left are never drawn


@pytest.mark.parametrize("buffer_class", [SequenceReplayBuffer, PrioritizedSequenceReplayBuffer])
def test_a_checkpoint_round_trips_bitwise_and_goes_on_sharing(buffer_class):
    buf = buffer_class(capacity=30, seed=3, steps_per_sequence=4)
    stream = episodes(3, [[15, 40, 100], [170], [6] * 30], seed=7)
    for _ in range(60):
        buf.push(*next(stream)[:2])
        if isinstance(buf, PrioritizedSequenceReplayBuffer):
            batch = buf.sample(8)
            buf.update_priorities(batch.index, batch.ret[:, 0] + 1)
    copy = buffer_class(capacity=30, seed=99, steps_per_sequence=4)
    copy.load(buf.state(), {k: v.copy() for k, v in buf.arrays().items()})
    assert copy.state() == buf.state()
    for k, v in buf.arrays().items():
        np.testing.assert_array_equal(copy.arrays()[k], v, err_msg=k)
    for _ in range(20):  # the same pushes (sharing the same steps), draws and priorities
        pushed = next(stream)[:2]
        buf.push(*pushed)
        copy.push(*pushed)
        a, b = buf.sample(8), copy.sample(8)
        same(a, b)
        np.testing.assert_array_equal(a.index, b.index)
        np.testing.assert_array_equal(a.weight, b.weight)
    assert copy.store.written == buf.store.written and copy.state() == buf.state()
    larger = buffer_class(capacity=50, seed=0, steps_per_sequence=4)
    larger.load(buf.state(), buf.arrays())
    held = np.arange(buf.rows_written - len(buf), buf.rows_written)
    same(larger.store.gather(held % 50), buf.store.gather(held % 30))
    with pytest.raises(ConfigError, match=r"steps_per_sequence=null: the checkpoint's sequences"):
        buffer_class(capacity=30, seed=0).load(buf.state(), buf.arrays())  # stored whole
    small = buffer_class(capacity=30, seed=0, steps_per_sequence=1)
    with pytest.raises(ConfigError, match=r"steps_per_sequence=1: a ring of 30 steps"):
        small.load(buf.state(), buf.arrays())


@pytest.mark.parametrize("per_sequence", [None, 9])
def test_the_memory_bound_counts_the_ring_of_steps_and_the_rows(tiny_config, per_sequence):
    """Built through the config and filled by the agent's own sampler until the rows wrap: the
    buffer's bytes are what the resource check estimated from the settings alone."""
    overrides = [
        "replay_buffer.capacity=8",
        f"replay_buffer.steps_per_sequence={per_sequence or 'null'}",
    ]
    config = to_plain(
        tiny_config("agent=r2d2", "agent.batch_size=4", "replay_buffer=sequence", *overrides)
    )
    parts = build_components(config, RunSettings.of(config), 0)
    buffer, agent = parts.buffer, parts.agent
    assert isinstance(buffer, SequenceReplayBuffer)
    sampler = Sampler(parts.env_factory, agent, 2, seed=0)
    present = 0
    while buffer.rows_written <= 10:
        if (batch := sampler.step(SampleStats())) is not None:
            assert batch.key is not None  # the sampler's keys, pushed with the sequences
            buffer.push(batch)
            present += int(batch.present.sum())
    sampler.close()
    ring = getattr(buffer.store, "ring", None)  # null: sequences stored whole
    assert ring == (None if per_sequence is None else 8 * per_sequence)
    if ring is not None:  # overlapping windows shared their steps
        assert buffer.store.written < present
    found = replay_nbytes(config["replay_buffer"], parts.env_factory.spaces(), agent)
    assert found == (8, buffer.nbytes)
    _, checkpointed = checkpoint_nbytes(config, parts, replay=True)
    assert checkpointed == buffer.nbytes
