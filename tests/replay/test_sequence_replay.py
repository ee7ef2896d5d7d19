"""Sequence replay: the ring of sequences, its memory, priorities, weights and snapshots."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from border_py.errors import ConfigError, RunError
from border_py.replay.sequence_prioritized import PrioritizedSequenceReplayBuffer
from border_py.replay.sequence_replay import SequenceReplayBuffer
from border_py.sequences import STORED_SEQUENCE, Sequences

B, L, N = 2, 3, 1  # burn-in, learning steps, tail: T = 6


def seqs(ids, priority=None, obs_shape=(3,), dtype=np.float32, burn_in=B) -> Sequences:
    """Sequences whose every column holds their id (obs, rewards, state, returns ...)."""
    v = np.asarray(ids)
    rows, steps = len(v), burn_in + L + N

    def full(shape, kind):
        return np.broadcast_to(v.reshape(-1, *[1] * len(shape)), (rows, *shape)).astype(kind)

    batch = Sequences(
        obs=full((steps, *obs_shape), dtype),
        action=full((steps,), np.int64),
        reward=full((steps,), np.float32),
        present=np.ones((rows, steps), bool),
        state=full((2, 4), np.float32),
        burn=np.full(rows, burn_in, np.int64),
        first_prev_action=v.astype(np.int64),
        first_prev_reward=v.astype(np.float32),
        ret=full((L,), np.float32),
        discount=np.ones((rows, L), np.float32),
        offset=np.ones((rows, L), np.int64),
        mask=np.ones((rows, L), bool),
        burn_in=burn_in,
    )
    if priority is not None:
        batch.priority = np.asarray(priority, np.float32)
    return batch


def rewards(buf) -> np.ndarray:
    """The first reward of the sequence in each row slot (0 in slots never written)."""
    return buf.store.gather(np.arange(buf.capacity)).reward[:, 0]


def ids_of(batch: Sequences) -> np.ndarray:
    """The id of each row, checked to be the same in every column (rows never mix)."""
    ids = batch.first_prev_action
    for name in ("obs", "action", "reward", "state", "ret"):
        column = getattr(batch, name)
        np.testing.assert_array_equal(
            column, np.broadcast_to(ids.reshape(-1, *[1] * (column.ndim - 1)), column.shape)
        )
    return ids


@pytest.mark.parametrize("buffer_class", [SequenceReplayBuffer, PrioritizedSequenceReplayBuffer])
def test_the_ring_overwrites_the_oldest_sequences_first(buffer_class):
    buf = buffer_class(capacity=4, seed=0)
    buf.push(seqs([0, 1, 2]))
    assert len(buf) == 3
    buf.push(seqs([3, 4, 5]))
    assert len(buf) == 4 and rewards(buf).tolist() == [4, 5, 2, 3]
    sample = buf.sample(500)
    assert set(ids_of(sample).tolist()) == {2, 3, 4, 5} and sample.burn_in == B
    buf.push(seqs(range(10, 20)))  # more than capacity: the newest 4 survive
    assert sorted(rewards(buf).tolist()) == [16, 17, 18, 19]
    mark = buf.rows_written
    buf.push(seqs([20]))
    written = buf.overwritten(np.arange(4), mark)
    assert written.sum() == 1 and rewards(buf)[written].tolist() == [20]


def test_a_batch_shaped_otherwise_is_refused_and_empty_buffers_do_not_sample():
    buf = SequenceReplayBuffer(capacity=4, seed=0)
    with pytest.raises(RuntimeError, match="empty"):
        buf.sample(2)
    buf.push(seqs([0]))
    with pytest.raises(
        ValueError,
        match=r"obs of shape \(6, 4\) \(float32\) per sequence, the stored ones are \(6, 3\)",
    ):
        buf.push(seqs([1], obs_shape=(4,)))
    with pytest.raises(ValueError, match=r"obs of shape \(7, 3\)"):  # a longer burn-in, T = 7
        buf.push(seqs([1], burn_in=B + 1))
    with pytest.raises(ValueError, match=r"\(6, 3\) \(uint8\)"):
        buf.push(seqs([1], dtype=np.uint8))
    assert len(buf) == 1


def test_rows_or_steps_are_preallocated_in_the_observations_dtype():
    space = gym.spaces.Box(0, 255, (4, 10, 10), np.uint8)
    buf = PrioritizedSequenceReplayBuffer(capacity=50, seed=0)
    buf.push(seqs([1, 2], obs_shape=space.shape, dtype=np.uint8))
    obs = buf.store._storage["obs"]  # stored whole: T steps a row
    assert obs.shape == (50, B + L + N, 4, 10, 10) and obs.dtype == np.uint8  # uint8 stays uint8
    assert buf.sample(3).obs.dtype == np.uint8
    estimate = PrioritizedSequenceReplayBuffer.estimate_nbytes(50, space, B + L + N, L, (2, 4))
    assert estimate == buf.nbytes  # the full buffer, worked out before it was built
    row = 3 * (4 + 4 + 8 + 1) + 4 * 8 + 8 + 8 + 4  # targets, state, burn and firsts
    whole = 50 * (row + 6 * (400 + 8 + 4 + 1))  # observation, action, reward, present
    assert SequenceReplayBuffer.estimate_nbytes(50, space, 6, L, (2, 4)) == whole
    ring = SequenceReplayBuffer(capacity=50, seed=0, steps_per_sequence=2)
    ring.push(seqs([1], obs_shape=space.shape, dtype=np.uint8))
    steps = ring.store.step_arrays["obs"]  # a ring of 50 * 2 steps and a zero one
    assert steps.shape == (101, 4, 10, 10) and steps.dtype == np.uint8
    by_hand = 101 * (400 + 8 + 4) + 100 * 8 + 50 * (row + 6 * 4)  # + users, int32 slots
    assert SequenceReplayBuffer.estimate_nbytes(50, space, 6, L, (2, 4), 2) == by_hand
    assert ring.nbytes == by_hand
    assert SequenceReplayBuffer.estimate_nbytes(50, gym.spaces.Dict({}), 6, L, (2, 4)) is None


def test_uniform_sampling_is_seeded():
    def draws(seed):
        buf = SequenceReplayBuffer(capacity=100, seed=seed)
        buf.push(seqs(range(100)))
        return ids_of(buf.sample(32)).tolist()

    assert draws(1) == draws(1) and draws(1) != draws(2)


# -- priorities ----------------------------------------------------------------------------------


def test_sampling_frequencies_match_the_priorities_to_the_alpha():
    buf = PrioritizedSequenceReplayBuffer(capacity=10, seed=3, alpha=0.9, eps=1e-6)
    buf.push(seqs(range(10)))
    priority = np.array([0.1, 0.5, 1.0, 2.0, 0.0, 3.0, 0.2, 0.7, 1.5, 4.0])
    buf.update_priorities(np.arange(10), priority)
    p = (priority + 1e-6) ** 0.9
    counts = np.zeros(10)
    for _ in range(2000):
        batch = buf.sample(64)
        np.testing.assert_array_equal(ids_of(batch), batch.index)  # the rows drawn
        np.add.at(counts, batch.index, 1)
    expected = counts.sum() * p / p.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 27.88, (chi2, counts, expected)  # chi-square, 9 dof, p = 0.001
    assert counts[4] == 0  # priority 1e-6 ** 0.9: about 4e-6 of the draws
    uniform = np.full(10, counts.sum() / 10)
    assert ((counts - uniform) ** 2 / uniform).sum() > 1000  # far from uniform


def test_a_stratified_draw_takes_one_row_from_each_segment_by_hand():
    # alpha 1, eps 1: priorities 1, 3, 4 (total 8); two segments [0, 4) and [4, 8): the first
    # holds rows 0 (prefix [0, 1)) and 1 ([1, 4)), the second row 2 only
    buf = PrioritizedSequenceReplayBuffer(capacity=3, seed=7, alpha=1.0, eps=1.0)
    buf.push(seqs([0, 1, 2]))
    buf.update_priorities(np.arange(3), [0.0, 2.0, 3.0])
    firsts = [buf.sample(2).index for _ in range(4000)]
    assert all(second == 2 for _, second in firsts)
    share = np.mean([first == 0 for first, _ in firsts])  # expectation 1/4
    assert abs(share - 0.25) < 4 * np.sqrt(0.25 * 0.75 / 4000)


def test_importance_weights_by_hand_and_beta_annealing():
    buf = PrioritizedSequenceReplayBuffer(
        capacity=4, seed=0, alpha=1.0, beta_start=0.5, beta_steps=4, eps=1.0
    )
    buf.push(seqs([0, 1, 2, 3]))
    buf.update_priorities(np.arange(4), [0.0, 1.0, 3.0, 7.0])  # p = 1, 2, 4, 8
    np.testing.assert_allclose(buf.priorities(), [1, 2, 4, 8])
    # w_i = (N P(i))^-beta / max_j (N P(j))^-beta = (p_i / p_min)^-beta
    by_hand = {
        0.5: [1.0, 0.70710678, 0.5, 0.35355339],
        0.625: [1.0, 0.64841977, 0.42044820, 0.27262693],
    }
    for beta in (0.5, 0.625):
        assert buf.beta == pytest.approx(beta)
        batch = buf.sample(64)
        np.testing.assert_allclose(batch.weight, np.asarray(by_hand[beta])[batch.index], rtol=1e-6)
        assert batch.weight.dtype == np.float32 and batch.weight.max() <= 1.0
    assert buf.beta == 0.75
    for _ in range(5):
        buf.sample(8)
    assert buf.beta == 1.0  # reached after beta_steps samples, and stays


def test_new_rows_get_the_largest_priority_seen_or_their_actors():
    buf = PrioritizedSequenceReplayBuffer(capacity=8, seed=0, alpha=0.5, eps=0.01)
    buf.push(seqs(range(4)))
    np.testing.assert_allclose(buf.priorities(), np.ones(4))  # the initial max priority, 1
    buf.update_priorities(np.array([1, 2, 1]), [2.0, 0.5, 8.99])  # row 1 repeated: last wins
    np.testing.assert_allclose(buf.priorities(), [1, 9.0**0.5, 0.51**0.5, 1])
    buf.push(seqs([4, 5]))
    np.testing.assert_allclose(buf.priorities()[4:], [3.0, 3.0])  # max(p + eps) = 9, ^0.5
    actors = PrioritizedSequenceReplayBuffer(
        capacity=4, seed=0, alpha=1.0, eps=0.5, priority_from_actors=True
    )
    actors.push(seqs([0, 1, 2], priority=[1.5, 0.0, 3.5]))
    actors.push(seqs([3, 4], priority=[0.5, 2.5]))  # wraps over row 0
    np.testing.assert_allclose(actors.priorities(), [3.0, 0.5, 4.0, 1.0])
    actors.push(seqs([5]))  # no actor priority: the largest seen, 4
    np.testing.assert_allclose(actors.priorities(), [3.0, 4.0, 4.0, 1.0])
    trees = actors.prioritization
    assert trees.sums.total == pytest.approx(12.0) and trees.mins.min == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_priorities_are_refused_and_change_nothing(bad):
    buf = PrioritizedSequenceReplayBuffer(
        capacity=8, seed=0, alpha=1.0, eps=0.5, priority_from_actors=True
    )
    buf.push(seqs([0, 1], priority=[0.5, 1.5]))
    before = (buf.priorities().copy(), buf.prioritization.max_priority, len(buf))
    with pytest.raises(RunError, match="1 non-finite priorities from an actor"):
        buf.push(seqs([2, 3], priority=[1.0, bad]))
    with pytest.raises(RunError, match="1 non-finite TD errors"):
        buf.update_priorities(np.array([0, 1]), [bad, 1.0])
    np.testing.assert_array_equal(buf.priorities(), before[0])
    assert (buf.prioritization.max_priority, len(buf)) == before[1:]


# -- snapshots -----------------------------------------------------------------------------------


def _same(a: Sequences, b: Sequences) -> None:
    for name in (*STORED_SEQUENCE, "weight", "index"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.burn_in == b.burn_in


@pytest.mark.parametrize("buffer_class", [SequenceReplayBuffer, PrioritizedSequenceReplayBuffer])
def test_a_snapshot_continues_sampling_exactly_and_fills_a_larger_buffer_in_time_order(
    buffer_class,
):
    buf = buffer_class(capacity=6, seed=1)
    buf.push(seqs(range(4)))
    buf.push(seqs(range(4, 9)))  # wrapped: rows hold 6, 7, 8, 3, 4, 5
    for _ in range(3):
        batch = buf.sample(4)
        if batch.index is not None:
            buf.update_priorities(batch.index, batch.ret[:, 0] / 3)
    same = buffer_class(capacity=6, seed=99)
    same.load(buf.state(), {k: v.copy() for k, v in buf.arrays().items()})
    for _ in range(3):  # the same draws, weights and sequences, on and on
        _same(same.sample(16), buf.sample(16))
    larger = buffer_class(capacity=10, seed=1)
    larger.load(buf.state(), buf.arrays())
    assert rewards(larger)[3:9].tolist() == [3, 4, 5, 6, 7, 8]  # row r in slot r % 10
    larger.push(seqs([9]))
    assert rewards(larger)[3:10].tolist() == [3, 4, 5, 6, 7, 8, 9]
    if isinstance(buf, PrioritizedSequenceReplayBuffer):
        order = [3, 4, 5, 0, 1, 2]
        np.testing.assert_array_equal(larger.priorities()[3:9], buf.priorities()[order])
    with pytest.raises(ConfigError, match=r"replay_buffer.capacity=5: must be >= 6"):
        buffer_class(capacity=5, seed=1).load(buf.state(), buf.arrays())
    obs = buf.arrays()["obs"]
    transitions = {"obs": obs, "next_obs": obs}  # not sequences
    if isinstance(buf, PrioritizedSequenceReplayBuffer):
        transitions["priority"] = buf.arrays()["priority"]
    with pytest.raises(
        ConfigError, match=r"holds \['next_obs', 'obs'\], not the steps and rows of sequences"
    ):
        buffer_class(capacity=6, seed=1).load(buf.state(), transitions)


def test_a_prioritized_resume_needs_the_priorities_or_continues_the_schedule_without_rows():
    buf = PrioritizedSequenceReplayBuffer(capacity=4, seed=2, beta_steps=10)
    buf.push(seqs(range(4)))
    buf.update_priorities(np.arange(4), [5.0, 1.0, 2.0, 3.0])
    buf.sample(2)
    arrays = dict(buf.arrays())
    arrays.pop("priority")
    with pytest.raises(ConfigError, match="no priorities"):
        PrioritizedSequenceReplayBuffer(capacity=4, seed=2).load(buf.state(), arrays)
    fresh = PrioritizedSequenceReplayBuffer(capacity=4, seed=0, beta_steps=10)
    fresh.continue_schedule(buf.state())
    assert fresh.prioritization.state() == buf.prioritization.state() and len(fresh) == 0
    assert fresh.beta == buf.beta
    assert fresh.rng.random() == buf.rng.random()
