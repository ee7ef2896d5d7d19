"""The uniform replay buffer: its ring, snapshots into larger buffers, seeded sampling."""

from __future__ import annotations

import numpy as np

from border_py.replay.uniform import UniformReplayBuffer
from border_py.transitions import Transitions


def test_replay_buffer_wraps_around_and_samples_what_it_holds():
    buf = UniformReplayBuffer(capacity=5, seed=0)

    def chunk(values):
        v = np.asarray(values, np.float32)
        return Transitions(v[:, None], v.astype(np.int64), v, v[:, None] + 100, np.ones_like(v))

    buf.push(chunk([0, 1, 2]))
    assert len(buf) == 3
    buf.push(chunk([3, 4, 5, 6]))
    assert len(buf) == 5 and buf.capacity == 5
    assert buf._storage["reward"].tolist() == [5, 6, 2, 3, 4]
    sample = buf.sample(1000)
    assert set(sample.reward.tolist()) == {2, 3, 4, 5, 6}
    np.testing.assert_array_equal(sample.next_obs[:, 0], sample.reward + 100)  # rows stay aligned
    buf.push(chunk(list(range(10, 22))))  # more than capacity: the newest 5 survive
    assert sorted(buf._storage["reward"].tolist()) == [17, 18, 19, 20, 21]


def test_replay_buffer_snapshot_into_a_larger_capacity_keeps_time_order():
    def chunk(values):
        v = np.asarray(values, np.float32)
        return Transitions(v[:, None], v.astype(np.int64), v, v[:, None], np.ones_like(v))

    small = UniformReplayBuffer(capacity=4, seed=0)
    small.push(chunk([0, 1, 2, 3, 4, 5]))  # wrapped: rows hold [4, 5, 2, 3]
    large = UniformReplayBuffer(capacity=8, seed=0)
    large.load(small.state(), small.arrays())
    large.push(chunk([6, 7]))
    assert len(large) == 6
    assert large._storage["reward"][:6].tolist() == [2, 3, 4, 5, 6, 7]  # oldest first, no zeros
    same = UniformReplayBuffer(capacity=4, seed=0)
    same.load(small.state(), small.arrays())
    assert same.sample(16).reward.tolist() == small.sample(16).reward.tolist()  # exact


def test_replay_buffer_sampling_is_seeded():
    def draws(seed):
        buf = UniformReplayBuffer(capacity=100, seed=seed)
        v = np.arange(100, dtype=np.float32)
        buf.push(Transitions(v[:, None], v, v, v[:, None], v))
        return buf.sample(32).reward.tolist()

    assert draws(1) == draws(1)
    assert draws(1) != draws(2)
