"""n-step returns on hand-checked numbers, across episode ends, per env, on a real env."""

from __future__ import annotations

import numpy as np
import pytest

from border_py.actors.nstep import NStepProcessor
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.dqn import DQN
from border_py.envs.factory import GymEnvFactory
from border_py.envs.vector import VectorStep
from border_py.transitions import Transitions


def _step(reward, terminated=False, truncated=False, next_obs=0.0) -> VectorStep:
    arr = np.array([[next_obs]], np.float32)
    return VectorStep(
        arr,
        arr,
        np.array([reward], np.float32),
        np.array([terminated]),
        np.array([truncated]),
        [],
        [],
    )


def _process(proc: NStepProcessor, obs, action, step: VectorStep) -> Transitions | None:
    """One step added and taken at once (as the serial trainer's sampler does)."""
    proc.add(obs, action, step)
    return proc.take()


@pytest.mark.parametrize("take_every", [1, 2, 5])
@pytest.mark.parametrize("truncated", [False, True])
def test_n_step_returns_across_an_episode_end(truncated, take_every):
    # gamma 0.5, n 3; rewards 1..5 from obs 0..4, the fifth step ends the episode in obs 5.
    proc = NStepProcessor(n_envs=1, n_step=3, gamma=0.5)
    out = []
    for k in range(5):
        last = k == 4
        proc.add(
            np.array([[k]], np.float32),
            np.array([k]),
            _step(
                k + 1,
                terminated=last and not truncated,
                truncated=last and truncated,
                next_obs=k + 1,
            ),
        )
        batch = proc.take() if (k + 1) % take_every == 0 or last else None
        if batch is not None:
            out.append(batch)
    t = Transitions.concat(out)
    assert t.obs[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert t.reward.tolist() == pytest.approx([2.75, 4.5, 6.25, 6.5, 5.0])
    assert t.next_obs[:, 0].tolist() == [3, 4, 5, 5, 5]
    # termination: nothing to bootstrap; truncation: bootstrap with gamma**k, k = steps summed
    end = [0.125, 0.25, 0.5] if truncated else [0.0, 0.0, 0.0]
    assert t.discount.tolist() == pytest.approx([0.125, 0.125, *end])


def test_n_step_keeps_envs_apart():
    proc = NStepProcessor(n_envs=2, n_step=2, gamma=1.0)
    obs = np.array([[0.0], [10.0]], np.float32)
    step = VectorStep(
        obs + 1,
        obs + 1,
        np.array([1.0, 10.0], np.float32),
        np.array([False, True]),
        np.array([False, False]),
        [],
        [],
    )
    first = _process(proc, obs, np.array([0, 0]), step)
    assert first.obs[:, 0].tolist() == [10.0] and first.discount.tolist() == [0.0]  # env 1 ended
    step2 = VectorStep(
        obs + 2,
        obs + 2,
        np.array([2.0, 20.0], np.float32),
        np.array([False, False]),
        np.array([False, False]),
        [],
        [],
    )
    second = _process(proc, obs + 1, np.array([1, 1]), step2)
    assert second.obs[:, 0].tolist() == [0.0]  # env 0's first 2-step window: 1 + 2
    assert second.reward.tolist() == [3.0] and second.next_obs[:, 0].tolist() == [2.0]


def _two_envs(reward: list[float]) -> VectorStep:
    obs = np.zeros((2, 1), np.float32)
    no = np.array([False, False])
    return VectorStep(obs, obs, np.array(reward, np.float32), no, no, [], [])


def test_a_non_finite_reward_stays_in_the_returns_that_sum_it():
    """The block maths: the episode that ended first keeps its return, the next one's -inf stays
    in its own (rewards outside a window are left out: inf * 0 would be nan)."""
    proc = NStepProcessor(n_envs=1, n_step=3, gamma=0.5)
    obs, action = np.zeros((1, 1), np.float32), np.array([0])
    proc.add(obs, action, _step(1.0, terminated=True))
    proc.add(obs, action, _step(-np.inf))
    assert proc.take().reward.tolist() == [1.0]
    proc.add(obs, action, _step(0.0))
    proc.add(obs, action, _step(0.0))
    assert proc.take().reward.tolist() == [-np.inf]  # the window of the -inf step, now full


@pytest.mark.parametrize("n_step", [1, 3])
def test_the_fast_paths_keep_a_non_finite_reward_in_its_env(n_step):
    """One-step transitions, and the serial trainer's steady state (one step taken after full
    windows): one env's -inf does not reach the other's returns."""
    proc = NStepProcessor(n_envs=2, n_step=n_step, gamma=0.5)
    obs, action = np.zeros((2, 1), np.float32), np.array([0, 0])
    out = [_process(proc, obs, action, _two_envs([1.0, 1.0])) for _ in range(n_step - 1)]
    out += [_process(proc, obs, action, _two_envs([1.0, -np.inf]))]
    out += [_process(proc, obs, action, _two_envs([1.0, 1.0])) for _ in range(n_step - 1)]
    rewards = np.array([t.reward for t in out if t is not None])  # one row per take, one per env
    assert rewards[:, 0].tolist() == [sum(0.5**k for k in range(n_step))] * n_step
    assert np.isneginf(rewards[:, 1]).all()


def test_truncation_bootstraps_from_the_final_observation_of_a_real_env():
    factory = GymEnvFactory("CartPole-v1", max_episode_steps=5)
    agent = DQN(*factory.spaces(), gamma=0.9, eps_start=0.0, eps_final=0.0)
    # an always-"left"-safe check: find a 5-step episode that is truncated, not terminated
    sampler = Sampler(factory, agent, n_envs=1, seed=3)
    stats = SampleStats()
    batch = sampler.sample(5, stats)
    sampler.close()
    assert stats.episode_lengths and stats.episode_lengths[0] <= 5
    if stats.episode_lengths[0] == 5:  # truncated by the time limit
        assert batch.discount[4] == pytest.approx(0.9)
        assert not np.allclose(
            batch.next_obs[4], sampler.env.obs[0]
        )  # final obs, not the reset obs
    np.testing.assert_allclose(batch.next_obs[:-1], batch.obs[1:])


def _reference_windows(n_envs, n_step, gamma, steps):
    """Plain per-env n-step transitions, the definition step by step: for each step, the
    transitions it finishes as ``(start step, env, obs, action, return, next_obs, discount)``."""
    windows = [[] for _ in range(n_envs)]
    out = []
    for t, (obs, action, reward, terminated, truncated, next_obs) in enumerate(steps):
        finished = []
        for e in range(n_envs):
            windows[e].append((t, obs[e], action[e], reward[e]))
            ended = terminated[e] or truncated[e]
            if not ended and len(windows[e]) < n_step:
                continue
            starts = range(len(windows[e])) if ended else [0]  # an end empties the window
            for j in starts:
                window = windows[e][j:]
                ret = sum(gamma**k * r for k, (*_, r) in enumerate(window))
                discount = 0.0 if terminated[e] else gamma ** len(window)
                start, o, a, _ = window[0]
                finished.append((start, e, o, a, ret, next_obs[e], discount))
            windows[e] = [] if ended else windows[e][1:]
        out.append(finished)
    return out


def _random_steps(rng, n_envs, n_steps, end_rate):
    steps = []
    for _ in range(n_steps):
        ends = rng.random(n_envs)
        steps.append(
            (
                rng.normal(size=(n_envs, 2)).astype(np.float32),
                rng.integers(0, 4, n_envs),
                rng.normal(size=n_envs).astype(np.float32),
                ends < end_rate / 2,
                (ends >= end_rate / 2) & (ends < end_rate),
                rng.normal(size=(n_envs, 2)).astype(np.float32),
            )
        )
    return steps


@pytest.mark.parametrize("n_step", [1, 2, 3, 5])
@pytest.mark.parametrize("end_rate", [0.5, 0.14, 0.01])  # mostly ends, often, mostly full windows
@pytest.mark.parametrize("longest_block", [1, 11])  # a take after every step (step()), or 1-11
def test_n_step_matches_the_definition_on_random_blocks_and_survives_checkpoints(
    n_step, end_rate, longest_block
):
    rng = np.random.default_rng(n_step)
    n_envs, gamma = 6, 0.9
    steps = _random_steps(rng, n_envs, 400, end_rate)
    expected = _reference_windows(n_envs, n_step, gamma, steps)
    proc = NStepProcessor(n_envs, n_step, gamma)
    t = takes = 0
    while t < len(steps):
        block = int(rng.integers(1, longest_block + 1))
        for obs, action, reward, terminated, truncated, next_obs in steps[t : t + block]:
            proc.add(
                obs, action, VectorStep(next_obs, next_obs, reward, terminated, truncated, [], [])
            )
        batch = proc.take()
        # exactly what the block's steps finished, by start step, then env
        want = sorted(row for finished in expected[t : t + block] for row in finished)
        t, takes = t + block, takes + 1
        assert (0 if batch is None else len(batch)) == len(want)
        if batch is not None:
            for got, (_, _, o, a, r, nxt, d) in zip(
                zip(*batch.arrays().values(), strict=True), want, strict=True
            ):
                np.testing.assert_array_equal(got[0], o)
                assert got[1] == a
                assert got[2] == pytest.approx(r, rel=1e-5, abs=1e-6)
                np.testing.assert_array_equal(got[3], nxt)
                assert got[4] == pytest.approx(d, rel=1e-6)
        if takes % 5 == 0:  # a checkpoint: a new processor continues from the old one's state
            state = proc.state()
            proc = NStepProcessor(n_envs, n_step, gamma)
            proc.load_state(state, np.dtype(np.float32), np.dtype(np.int64))


def test_the_windows_are_saved_only_between_takes_and_keep_the_actions_taken():
    proc = NStepProcessor(n_envs=1, n_step=2, gamma=1.0)
    action = np.array([3])
    proc.add(np.zeros((1, 1), np.float32), action, _step(1.0, next_obs=1.0))
    action[0] = 7  # an agent that reuses its action buffer
    with pytest.raises(RuntimeError, match="take"):
        proc.state()
    assert proc.take() is None
    assert proc.state() == [[([0.0], 3, 1.0)]]
    batch = _process(proc, np.ones((1, 1), np.float32), action, _step(2.0, next_obs=2.0))
    assert batch.action.tolist() == [3] and batch.reward.tolist() == [3.0]


def test_a_sampled_batch_fits_the_transport_slot_of_its_actor():
    # episodes of at most 2 steps end all the time: windows empty at once, several per env step
    factory = GymEnvFactory("CartPole-v1", max_episode_steps=2)
    agent = DQN(*factory.spaces(), n_step=3, eps_start=1.0, eps_final=1.0)
    sampler = Sampler(factory, agent, n_envs=4, seed=0)
    sizes = [len(sampler.sample(10, SampleStats())) for _ in range(200)]
    sampler.close()
    assert min(sizes) >= 10
    assert max(sizes) <= 10 + 4 * 3  # the slot's rows: n_buffer + n_envs * n_step


def test_restored_windows_keep_the_action_dtype_and_refuse_a_longer_n_step():
    proc = NStepProcessor(n_envs=1, n_step=2, gamma=1.0)
    proc.load_state([[([0.0], [0.5], 1.0)]], np.dtype(np.float32), np.dtype(np.float32))
    batch = _process(proc, np.ones((1, 1), np.float32), np.ones((1, 1), np.float32), _step(2.0))
    assert batch.action.dtype == np.float32 and batch.action.tolist() == [[0.5]]
    with pytest.raises(ValueError, match="n_step=2"):  # a window of a 4-step agent
        proc.load_state([[([0.0], 0, 1.0)] * 3], np.dtype(np.float32), np.dtype(np.int64))
