"""Prioritized replay (sum/min trees, sampling, weights, priorities) and frame storage."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from border_py import train
from border_py.actors.frames import FrameEncoder
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.dqn import DQN, dqn_targets
from border_py.cli.train import check_overrides
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError, RunError
from border_py.replay.prioritized import PrioritizedReplayBuffer
from border_py.replay.sum_tree import BRANCHING, MinTree, SumTree
from border_py.replay.uniform import UniformReplayBuffer
from border_py.runs.checkpoint import load_checkpoint
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components
from border_py.trainers.loop import learn_step
from border_py.trainers.train import prepare
from border_py.transitions import STORED, Transitions

from ..conftest import FEW_FRESH_EVALS, make_config, scalar_tags
from ..frame_env import STACK, decode, pattern
from ..runs.test_resume import SERIAL

PATTERN = "tests.frame_env:FramePattern-v0"


def rows(values, priority=None) -> Transitions:
    """CartPole-shaped transitions whose reward identifies them."""
    v = np.asarray(values, np.float32)
    batch = Transitions(
        np.repeat(v[:, None], 4, 1), v.astype(np.int64), v, np.repeat(v[:, None], 4, 1) + 100, v
    )
    if priority is not None:
        batch.priority = np.asarray(priority, np.float32)
    return batch


# -- sum tree and min tree ----------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [1, 5, BRANCHING, BRANCHING + 1, 3000])
def test_sum_and_min_trees_stay_consistent_under_batched_updates(capacity):
    rng = np.random.default_rng(capacity)
    sums, mins = SumTree(capacity), MinTree(capacity)
    expected = np.zeros(capacity)
    for _ in range(50):
        index = rng.integers(0, capacity, size=int(rng.integers(1, 300)))  # with repeats
        values = rng.integers(0, 100, size=len(index)).astype(np.float64)
        sums.set(index, values)
        mins.set(index, np.where(values > 0, values, np.inf))
        for i, v in zip(index, values, strict=True):  # a repeated index keeps its last value
            expected[i] = v
        np.testing.assert_array_equal(sums.leaves(), expected)
        assert sums.total == expected.sum()  # integer values: exact
        positive = expected[expected > 0]
        assert mins.min == (positive.min() if len(positive) else np.inf)
    for tree, reduce in ((sums, np.sum), (mins, np.min)):  # every node combines its children
        for child, parent in zip(tree.levels, tree.levels[1:], strict=False):
            groups = child.reshape(-1, BRANCHING)
            np.testing.assert_array_equal(parent[: len(groups)], reduce(groups, axis=1))
    rebuilt = SumTree(capacity)
    rebuilt.rebuild(expected)
    for a, b in zip(rebuilt.levels, sums.levels, strict=True):
        np.testing.assert_array_equal(a, b)  # a pure function of the leaves


def test_prefix_search_by_hand():
    tree = SumTree(4)
    tree.set(np.arange(4), [1.0, 0.0, 2.0, 3.0])
    values = np.array([0.0, 0.99, 1.0, 2.99, 3.0, 5.99])
    np.testing.assert_array_equal(tree.find_prefix(values), [0, 0, 2, 2, 3, 3])  # leaf 1 is 0

    big = SumTree(3000)  # three levels under the root
    leaves = np.zeros(3000)
    leaves[[7, 1500, 2999]] = [2.0, 1.0, 5.0]
    big.rebuild(leaves)
    found = big.find_prefix(np.array([0.0, 1.5, 2.0, 2.5, 3.0, 7.99]))
    np.testing.assert_array_equal(found, [7, 7, 1500, 1500, 2999, 2999])

    rng = np.random.default_rng(0)
    leaves = rng.integers(0, 4, size=3000).astype(np.float64)  # many zeros; exact sums
    big.rebuild(leaves)
    values = rng.integers(0, int(leaves.sum()), size=5000) + rng.choice([0.0, 0.5], 5000)
    expected = np.searchsorted(np.cumsum(leaves), values, side="right")
    np.testing.assert_array_equal(big.find_prefix(values), expected)
    assert (leaves[big.find_prefix(values)] > 0).all()


# -- prioritized sampling -----------------------------------------------------------------------


def test_sampling_frequencies_match_priorities_to_the_alpha():
    buf = PrioritizedReplayBuffer(capacity=10, seed=3, alpha=0.6, eps=1e-6)
    buf.push(rows(range(10)))
    td = np.array([0.1, 0.5, 1.0, 2.0, 0.0, 3.0, 0.2, 0.7, 1.5, 4.0])
    buf.update_priorities(np.arange(10), td)
    p = (np.abs(td) + 1e-6) ** 0.6
    counts = np.zeros(10)
    for _ in range(2000):
        np.add.at(counts, buf.sample(64).index, 1)
    expected = counts.sum() * p / p.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 27.88, (chi2, counts, expected)  # chi-square, 9 dof, p = 0.001
    # and the opposite: the counts are far from uniform
    uniform = np.full(10, counts.sum() / 10)
    assert ((counts - uniform) ** 2 / uniform).sum() > 1000


def test_importance_weights_by_hand_and_beta_annealing():
    buf = PrioritizedReplayBuffer(
        capacity=4, seed=0, alpha=1.0, beta_start=0.5, beta_steps=4, eps=1.0
    )
    buf.push(rows([0, 1, 2, 3]))
    buf.update_priorities(np.arange(4), [0.0, 1.0, -3.0, 7.0])  # p = |td| + 1 = 1, 2, 4, 8
    np.testing.assert_allclose(buf.priorities(), [1, 2, 4, 8])
    # w_i = (N P(i))^-beta / max_j (N P(j))^-beta with N = 4, P = p / 15: (p_i / p_min)^-beta
    by_hand = {
        0.5: [1.0, 0.70710678, 0.5, 0.35355339],
        0.625: [1.0, 0.64841977, 0.42044820, 0.27262693],
    }
    for beta in (0.5, 0.625):
        assert buf.beta == pytest.approx(beta)
        batch = buf.sample(64)
        np.testing.assert_allclose(batch.weight, np.asarray(by_hand[beta])[batch.index], rtol=1e-6)
        assert batch.weight.dtype == np.float32 and batch.weight.max() <= 1.0
        np.testing.assert_array_equal(batch.reward, batch.index)  # the rows drawn
    assert buf.beta == 0.75
    for _ in range(5):
        buf.sample(8)
    assert buf.beta == 1.0  # reached after beta_steps samples, and stays


def test_priorities_come_from_td_errors_and_new_rows_get_the_max():
    buf = PrioritizedReplayBuffer(capacity=8, seed=0, alpha=0.5, eps=0.01)
    buf.push(rows(range(4)))
    np.testing.assert_allclose(buf.priorities(), np.ones(4))  # the initial max priority, 1
    buf.update_priorities(np.array([1, 2, 1]), [2.0, -0.5, 8.99])  # row 1 repeated: last wins
    np.testing.assert_allclose(buf.priorities(), [1, 9.0**0.5, 0.51**0.5, 1])
    buf.push(rows([4, 5]))
    np.testing.assert_allclose(buf.priorities()[4:], [3.0, 3.0])  # max(|td| + eps) = 9, ^0.5
    assert buf.prioritization.sums.total == pytest.approx(buf.priorities().sum())
    assert buf.prioritization.mins.min == pytest.approx(0.51**0.5)


def test_overwritten_rows_take_the_new_rows_priorities():
    buf = PrioritizedReplayBuffer(capacity=4, seed=0, alpha=1.0, eps=0.5, priority_from_actors=True)
    buf.push(rows([0, 1, 2, 3], priority=[9.5, 9.5, 9.5, 9.5]))
    buf.push(rows([4, 5], priority=[0.5, 1.5]))  # the ring wraps over rows 0 and 1
    np.testing.assert_allclose(buf.priorities(), [1.0, 2.0, 10.0, 10.0])
    assert buf._storage["reward"].tolist() == [4, 5, 2, 3]
    trees = buf.prioritization
    assert trees.sums.total == pytest.approx(23.0) and trees.mins.min == pytest.approx(1.0)
    buf.update_priorities(np.array([2, 3]), [0.0, 0.0])  # now 0.5 each
    buf.push(rows([6]))  # no actor priority: the largest seen, 10, replaces row 2's 0.5
    np.testing.assert_allclose(buf.priorities(), [1.0, 2.0, 10.0, 0.5])
    assert buf._storage["reward"].tolist() == [4, 5, 6, 3]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_priorities_are_refused_and_change_nothing(bad):
    buf = PrioritizedReplayBuffer(capacity=8, seed=0, alpha=1.0, eps=0.5, priority_from_actors=True)
    buf.push(rows([0, 1, 2, 3], priority=[0.5, 1.5, 2.5, 3.5]))
    prio = buf.prioritization
    before = (buf.priorities().copy(), buf._storage["reward"].copy(), prio.max_priority, len(buf))
    with pytest.raises(RunError, match=r"1 non-finite priorities from an actor: .* diverged"):
        buf.push(rows([4, 5], priority=[1.0, bad]))  # one NaN would make every draw row 0
    with pytest.raises(RunError, match=r"1 non-finite TD errors: .* diverged"):
        buf.update_priorities(np.array([0, 1]), [bad, 1.0])
    after = (buf.priorities(), buf._storage["reward"], prio.max_priority, len(buf))
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert after[2:] == before[2:] and prio.sums.total == pytest.approx(10.0)
    assert sorted(set(buf.sample(64).index.tolist())) == [0, 1, 2, 3]  # still drawn by priority


def test_prioritized_snapshot_round_trip_same_and_larger_capacity():
    buf = PrioritizedReplayBuffer(capacity=6, seed=1, beta_steps=10)
    buf.push(rows(range(4)))
    buf.push(rows(range(4, 9)))  # wrapped: rows hold 6, 7, 8, 3, 4, 5
    for _ in range(3):
        batch = buf.sample(4)
        buf.update_priorities(batch.index, batch.reward / 3)
    same = PrioritizedReplayBuffer(capacity=6, seed=99, beta_steps=10)
    same.load(buf.state(), buf.arrays())
    np.testing.assert_array_equal(same.priorities(), buf.priorities())
    assert same.prioritization.state() == buf.prioritization.state() and same.beta == buf.beta
    a, b = same.sample(16), buf.sample(16)
    np.testing.assert_array_equal(a.index, b.index)
    np.testing.assert_array_equal(a.weight, b.weight)
    larger = PrioritizedReplayBuffer(capacity=10, seed=1)
    larger.load(buf.state(), buf.arrays())
    order = [3, 4, 5, 0, 1, 2]  # oldest first
    np.testing.assert_array_equal(larger.priorities(), buf.priorities()[order])
    np.testing.assert_array_equal(larger._storage["reward"][:6], buf._storage["reward"][order])
    assert larger.prioritization.sums.total == pytest.approx(buf.prioritization.sums.total)


def test_dqn_applies_the_weights_once_and_returns_td_errors():
    factory = GymEnvFactory("CartPole-v1")
    agent = DQN(*factory.spaces(), hidden_sizes=[16], seed=0, max_grad_norm=None, double_dqn=True)
    rng = np.random.default_rng(0)
    n = 8
    batch = Transitions(
        rng.normal(size=(n, 4)).astype(np.float32),
        rng.integers(0, 2, n),
        rng.normal(size=n).astype(np.float32),
        rng.normal(size=(n, 4)).astype(np.float32),
        np.full(n, 0.9, np.float32),
        weight=np.linspace(0.1, 1.0, n).astype(np.float32),
        index=np.arange(n),
    )
    with torch.no_grad():
        obs, next_obs = torch.as_tensor(batch.obs), torch.as_tensor(batch.next_obs)
        q = agent.q(obs).gather(1, torch.as_tensor(batch.action)[:, None])[:, 0]
        y = dqn_targets(
            torch.as_tensor(batch.reward),
            torch.as_tensor(batch.discount),
            agent.q(next_obs),
            agent.q_target(next_obs),
            True,
        )
        per_sample = F.smooth_l1_loss(q, y, reduction="none")
        once = (torch.as_tensor(batch.weight) * per_sample).mean()
        twice = (torch.as_tensor(batch.weight) ** 2 * per_sample).mean()
    assert abs(float(once) - float(twice)) > 1e-3  # the test tells the two apart
    actor_td = agent.td_error(batch)  # online bootstrap; no state change
    metrics = agent.update(batch)
    assert float(metrics["train/loss"]) == pytest.approx(float(once), rel=1e-5)
    td = metrics["td_error"]
    assert td.dtype == np.float32 and td.shape == (n,)
    np.testing.assert_allclose(td, (y - q).abs().numpy(), rtol=1e-5)
    assert actor_td.shape == (n,) and (actor_td >= 0).all()
    uniform = Transitions(*(batch.arrays()[k] for k in STORED))
    assert "td_error" not in agent.update(uniform)  # uniform samples: no numpy copy


def test_td_error_uses_the_online_network_and_changes_nothing():
    factory = GymEnvFactory("CartPole-v1")
    agent = DQN(*factory.spaces(), hidden_sizes=[16], seed=0)
    with torch.no_grad():
        for p in agent.q_target.parameters():
            p.add_(1.0)  # a target net very different from the online one
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(5, 4)).astype(np.float32)
    nxt = rng.normal(size=(5, 4)).astype(np.float32)
    batch = Transitions(
        obs, np.array([0, 1, 1, 0, 1]), np.ones(5, np.float32), nxt, np.full(5, 0.5, np.float32)
    )
    before = {k: v.clone() for k, v in agent.q.state_dict().items()}
    td = agent.td_error(batch)
    with torch.no_grad():
        q = agent.q(torch.as_tensor(obs)).numpy()[np.arange(5), batch.action]
        y = 1.0 + 0.5 * agent.q(torch.as_tensor(nxt)).numpy().max(axis=1)
    np.testing.assert_allclose(td, np.abs(y - q), rtol=1e-5)
    for k, v in agent.q.state_dict().items():
        assert torch.equal(v, before[k])


def test_learn_step_updates_the_sampled_rows_priorities():
    factory = GymEnvFactory("CartPole-v1")
    agent = DQN(*factory.spaces(), hidden_sizes=[16], seed=0, batch_size=16)
    buf = PrioritizedReplayBuffer(capacity=64, seed=0, alpha=1.0, eps=1e-3)
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 4)).astype(np.float32)
    buf.push(
        Transitions(
            obs, rng.integers(0, 2, 64), np.ones(64, np.float32), obs, np.zeros(64, np.float32)
        )
    )
    metrics = learn_step(agent, buf)
    assert "td_error" not in metrics and "train/loss" in metrics
    changed = np.flatnonzero(buf.priorities() != 1.0)
    assert 0 < len(changed) <= 16
    # the new priorities are |y - Q| + eps of the weights before the step: y = r = 1 (d = 0)
    assert np.all(buf.priorities()[changed] > 1e-3)


# -- config errors ------------------------------------------------------------------------------


class NoTDErrors(DQN):
    """A DQN that does not declare TD errors (a user's agent that cannot feed priorities)."""

    reports_td_error = False


class NoActorTD(DQN):
    """A DQN without the actor-side ``td_error``."""

    td_error = None


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            [
                "replay_buffer=prioritized",
                "agent._target_=tests.replay.test_prioritized_and_frames.NoTDErrors",
            ],
            "replay_buffer=prioritized: the agent NoTDErrors does not report TD errors",
        ),
        (
            [
                "replay_buffer=prioritized",
                "replay_buffer.priority_from_actors=true",
                "agent._target_=tests.replay.test_prioritized_and_frames.NoActorTD",
            ],
            "replay_buffer.priority_from_actors=true: the agent NoActorTD has no td_error(batch)",
        ),
        (
            ["replay_buffer=prioritized", "replay_buffer.alpha=-1"],
            "replay_buffer.alpha=-1: must be",
        ),
        (
            ["replay_buffer=prioritized", "replay_buffer.beta_start=2"],
            "replay_buffer.beta_start=2:",
        ),
        (
            ["replay_buffer=prioritized", "replay_buffer.beta_steps=-1"],
            "replay_buffer.beta_steps=-1",
        ),
        (["replay_buffer=prioritized", "replay_buffer.eps=0"], "replay_buffer.eps=0: must be a"),
        (
            ["replay_buffer=prioritized", "replay_buffer.priority_from_actors=3"],
            "replay_buffer.priority_from_actors=3: must be true or false",
        ),
        (
            ["replay_buffer.frame_stack=0"],
            "replay_buffer.frame_stack=0: must be null or a positive",
        ),
        (
            ["replay_buffer.frame_stack=4"],
            "replay_buffer.frame_stack=4: must be null for observations Box(",
        ),
        (
            ["env=gym", f"env.id={PATTERN}", "agent.network=mlp", "replay_buffer.frame_stack=3"],
            "frame storage needs uint8 stacks of shape (3, H, W)",
        ),
    ],
)
def test_bad_prioritized_or_frame_settings_are_one_line(overrides, expected):
    with pytest.raises(ConfigError) as err:
        check_overrides(overrides)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_frame_stack_settings_that_fit_pass():
    check_overrides(
        ["env=gym", f"env.id={PATTERN}", "agent.network=mlp", "replay_buffer.frame_stack=4"]
    )
    check_overrides(["replay_buffer=prioritized", "replay_buffer.priority_from_actors=true"])


# -- frame storage ------------------------------------------------------------------------------


def check_pattern_stacks(batch: Transitions, n_step: int, gamma: float, zero_padded: bool = False):
    """Every stack of ``batch`` is the one FrameStackObservation gives for its frames' steps."""
    assert len(batch) > 0
    for obs, nxt, discount in zip(batch.obs, batch.next_obs, batch.discount, strict=True):
        tag, episode, t = decode(obs[-1])
        tag2, episode2, t2 = decode(nxt[-1])
        assert (tag2, episode2) == (tag, episode) and 1 <= t2 - t <= n_step
        assert discount == 0 or discount == pytest.approx(gamma ** (t2 - t))
        for stack, newest in ((obs, t), (nxt, t2)):
            for j in range(STACK):
                step = newest - (STACK - 1 - j)
                if step < 0 and zero_padded:
                    assert not stack[j].any()
                else:
                    np.testing.assert_array_equal(stack[j], pattern(tag, episode, max(step, 0)))


def _agent(factory: GymEnvFactory, n_step: int = 3) -> DQN:
    return DQN(
        *factory.spaces(),
        hidden_sizes=[8],
        network="mlp",  # the pattern env's frames are too small for the Nature CNN
        n_step=n_step,
        seed=0,
        eps_decay_steps=0,
        eps_final=0.5,
    )


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [PATTERN, "tests.frame_env:PongStack-v0"])
def test_rebuilt_stacks_equal_frame_stack_observation(env_id):
    """The same seeds and actions with and without frame storage give the same transitions,
    across episode ends (terminations and time limits), 3 envs per sampler, n-step returns."""
    factory = GymEnvFactory(env_id)
    plain = Sampler(factory, _agent(factory), 3, seed=5)
    framed = Sampler(factory, _agent(factory), 3, seed=5, frame_stack=STACK)
    buf = PrioritizedReplayBuffer(100_000, seed=0, frame_stack=STACK)
    expected = []
    steps = 150 if "Pong" in env_id else 300
    for _ in range(steps):
        a, b = plain.step(SampleStats()), framed.step(SampleStats())
        assert (a is None) == (b is None)
        if a is not None:
            expected.append(a)
            assert b.obs.shape == (len(b),) and b.obs.dtype == np.int64  # ids on the wire
            buf.push(b)
    plain.close()
    framed.close()
    expected = Transitions.concat(expected)
    got = buf._gather(np.arange(len(buf)))
    for key in STORED:
        np.testing.assert_array_equal(getattr(got, key), getattr(expected, key), err_msg=key)
    assert (np.abs(expected.discount - 0.99**3) > 1e-6).sum() > 3  # it crossed episode ends
    # about one frame per transition (plus one per episode), not 2 x 4
    assert buf._frames.written < 1.5 * len(buf)
    sample = buf.sample(64)
    np.testing.assert_array_equal(sample.obs, expected.obs[sample.index])


@pytest.mark.slow
@pytest.mark.parametrize("padding", ["reset", "zero"])
@pytest.mark.parametrize("buffer_class", [UniformReplayBuffer, PrioritizedReplayBuffer])
def test_frame_storage_with_interleaved_sources_and_ring_wrap(buffer_class, padding):
    """Three samplers (actors) of 2 envs each push in turn into a small ring that wraps many times
    and loses frames under transitions still stored: samples are always whole, correct stacks."""
    factory = GymEnvFactory(PATTERN, kwargs={"padding": padding})
    samplers = [
        Sampler(factory, _agent(factory), 2, seed=10 * i + 1, frame_stack=STACK) for i in range(3)
    ]
    buf = buffer_class(capacity=40, seed=0, frame_stack=STACK)
    assert buf._frames.capacity == 42
    saw_dead = False
    for round_ in range(60):
        for sampler in samplers[: 1 + round_ % 3]:
            buf.push(sampler.sample(int(1 + round_ % 7), SampleStats()))
        saw_dead |= bool((~buf._live(np.arange(len(buf)))).any())
        batch = buf.sample(32)
        check_pattern_stacks(batch, n_step=3, gamma=0.99, zero_padded=padding == "zero")
    assert saw_dead  # the frame ring did overwrite frames of stored transitions
    assert len(buf._frames.sources) <= 3
    for s in samplers:
        s.close()


@pytest.mark.slow
def test_large_batches_referencing_earlier_batches_frames_stay_whole():
    """An actor's batch uses frames its earlier batches sent (pending n-step windows, the stacks'
    older frames): with a ring that loses nothing, every row stays whole."""
    factory = GymEnvFactory(PATTERN)
    samplers = [Sampler(factory, _agent(factory), 2, seed=s, frame_stack=STACK) for s in (1, 2)]
    buf = UniformReplayBuffer(capacity=10_000, seed=0, frame_stack=STACK)
    for _ in range(8):
        for sampler in samplers:
            buf.push(sampler.sample(60, SampleStats()))
    assert buf._live(np.arange(len(buf))).all()
    check_pattern_stacks(buf._gather(np.arange(len(buf))), n_step=3, gamma=0.99)
    for sampler in samplers:
        sampler.close()


def test_frame_encoder_refuses_observations_that_are_not_stacks():
    frames = np.arange(2 * 4 * 3 * 3, dtype=np.uint8).reshape(2, 4, 3, 3)
    with pytest.raises(ValueError, match="not a frame stack padded"):
        FrameEncoder(0, 2, 1, frames)
    first = np.repeat(frames[:, :1], 4, axis=1)
    enc = FrameEncoder(0, 2, 1, first)
    wrong = first.copy()
    wrong[:, 0] += 1  # the older frames do not continue the previous stack
    with pytest.raises(ValueError, match="not frame stacks"):
        enc.observe(first, wrong, np.zeros(2, bool), wrong)


def test_frame_storage_snapshot_round_trip():
    factory = GymEnvFactory(PATTERN)
    sampler = Sampler(factory, _agent(factory), 2, seed=3, frame_stack=STACK)
    buf = PrioritizedReplayBuffer(capacity=50, seed=0, frame_stack=STACK)
    for _ in range(20):
        buf.push(sampler.sample(8, SampleStats()))
    arrays = buf.arrays()
    assert arrays["frame_pixels"].dtype == np.uint8 and arrays["obs"].dtype == np.int64
    assert len(arrays["frame_pixels"]) == buf._frames.capacity  # the ring has wrapped
    same = PrioritizedReplayBuffer(capacity=50, seed=5, frame_stack=STACK)
    same.load(buf.state(), arrays)
    a, b = same.sample(32), buf.sample(32)
    for key in (*STORED, "weight", "index"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)
    larger = PrioritizedReplayBuffer(capacity=200, seed=0, frame_stack=STACK)
    larger.load(buf.state(), arrays)
    live = np.flatnonzero(larger._live(np.arange(len(larger))))
    assert len(live) > 30
    check_pattern_stacks(larger._gather(live), n_step=3, gamma=0.99)
    larger.push(sampler.sample(8, SampleStats()))  # the stream continues where it was
    check_pattern_stacks(larger.sample(64), n_step=3, gamma=0.99)
    sampler.close()


# -- training runs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        ["replay_buffer=prioritized", "replay_buffer.beta_steps=400"],
        [
            "replay_buffer=prioritized",
            "replay_buffer.priority_from_actors=true",
            "env=gym",
            f"env.id={PATTERN}",
            "agent.network=mlp",
            "replay_buffer.frame_stack=4",
            "actor_manager.n_envs_per_actor=2",
            "replay_buffer.capacity=500",
        ],
    ],
    ids=["prioritized", "prioritized-frames-actor-priorities"],
)
@pytest.mark.slow
def test_serial_resume_with_prioritized_replay_is_exact(tmp_path, extra):
    full = tmp_path / "full"
    train(make_config(full, *SERIAL, *extra, "trainer.max_opts=600"))
    part = tmp_path / "part"
    train(make_config(part, *SERIAL, *extra, "trainer.max_opts=300"))
    ckpt = load_checkpoint(part / "run")
    buffer = ckpt.buffer()
    assert "priority" in buffer and ckpt.state.replay["samples"] == 300
    resumed = train(  # the test's own env (tests.frame_env) is trusted: a run dir is data
        make_config(part, "resume=" + str(part / "run"), "trust=[tests]"),
        overrides=["trainer.max_opts=600"],
    )
    assert resumed["opt_steps"] == 600
    for tag in ("train/loss", "train/q_mean", "eval/return_mean"):
        a, b = scalar_tags(full / "run")[tag], scalar_tags(part / "run")[tag]
        assert [s for s, _ in a] == [s for s, _ in b], tag
        np.testing.assert_array_equal([v for _, v in a], [v for _, v in b], err_msg=tag)


@pytest.mark.slow
def test_resume_without_a_saved_buffer_continues_beta_and_refuses_sampler_changes(tmp_path):
    base = [*SERIAL, "replay_buffer=prioritized", "trainer.save_replay_buffer=false"]
    train(make_config(tmp_path, *base, "trainer.max_opts=300"))
    run = str(tmp_path / "run")
    assert load_checkpoint(run).state.replay["samples"] == 300
    train(make_config(tmp_path, "resume=" + run), overrides=["trainer.max_opts=400"])
    # beta's annealing went on from 300 samples, not from beta_start again
    assert load_checkpoint(run).state.replay["samples"] == 400
    with pytest.raises(ConfigError) as err:
        prepare(
            make_config(tmp_path, "resume=" + run),
            overrides=["trainer.max_opts=500", "replay_buffer.priority_from_actors=true"],
        )
    assert str(err.value) == (
        "replay_buffer.priority_from_actors=True: cannot change when resuming"
        " (the checkpoint has False)"
    )


@pytest.mark.parametrize(
    "extra",
    [
        [],
        [
            "env=gym",
            f"env.id={PATTERN}",
            "agent.network=mlp",
            "replay_buffer.frame_stack=4",
            "actor_manager.n_envs_per_actor=2",
        ],
    ],
    ids=["cartpole", "frames"],
)
@pytest.mark.slow
def test_actor_priorities_reach_the_buffer_in_an_async_run(tmp_path, extra):
    train(
        make_config(
            tmp_path,
            "replay_buffer=prioritized",
            "replay_buffer.priority_from_actors=true",
            "actor_manager.n_actors=2",
            "trainer.max_opts=10",
            "trainer.warmup_period=1500",
            "trainer.sync_interval=1000",  # actors act with the initial weights throughout
            "trainer.eval_interval=10",
            "trainer.eval_episodes=1",
            "trainer.save_replay_buffer=true",
            "agent.hidden_sizes=[16]",
            "agent.batch_size=16",
            *extra,
        )
    )
    ckpt = load_checkpoint(tmp_path / "run")
    parts = build_components(
        ckpt.config, RunSettings.of(ckpt.config), 0
    )  # a fresh learner agent: the initial weights
    buf = parts.buffer
    buf.load(ckpt.state.replay, ckpt.buffer())
    stored = buf._gather(np.arange(len(buf)))
    if extra:
        check_pattern_stacks(stored, n_step=3, gamma=0.99)  # 2 actors x 2 envs interleaved
    prio = buf.prioritization
    expected = (parts.agent.td_error(stored) + prio.eps) ** prio.alpha
    same = np.isclose(buf.priorities(), expected, rtol=1e-4, atol=1e-6)
    # every row the learner never sampled (at most 10 x 16 were) keeps its actor's priority
    assert len(buf) >= 1500 and same.sum() >= len(buf) - 10 * 16, (same.sum(), len(buf))
    assert len(np.unique(buf.priorities())) > 0.5 * len(buf)  # not one max priority for all


@pytest.mark.slow
def test_serial_prioritized_dqn_solves_cartpole(tmp_path):
    cfg = make_config(
        tmp_path,
        "seed=0",
        "trainer=serial",
        "replay_buffer=prioritized",
        "replay_buffer.beta_steps=20000",
        "trainer.target_return=475",
        "trainer.max_opts=25000",
        FEW_FRESH_EVALS,
    )
    summary = train(cfg)
    assert summary["best_return"] >= 475, summary
    assert summary["solved_at"] is not None


def test_prefix_search_at_the_clamped_top_never_leaves_the_leaves_with_mass():
    """Float rounding can make children sum to a little less than their parent; a draw in that
    sliver (the buffer clamps draws to just below the total) must still land on a leaf with mass
    (it used to walk into padding: IndexError, e.g. at 1703 leaves)."""
    rng = np.random.default_rng(0)
    for capacity in (1, 31, 33, 1703, 2049):
        for _ in range(20):
            tree = SumTree(capacity)
            leaves = rng.random(capacity) ** rng.integers(1, 8) * 10 ** rng.uniform(-8, 8)
            leaves[rng.random(capacity) < 0.3] = 0.0
            if leaves.sum() == 0:
                leaves[-1] = 1.0
            tree.rebuild(leaves)
            total = tree.total
            found = tree.find_prefix(np.array([0.0, np.nextafter(total, 0), total * (1 - 1e-16)]))
            assert (found < capacity).all()
            assert (tree.leaves(found) > 0).all()
