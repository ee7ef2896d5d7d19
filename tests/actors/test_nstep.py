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


@pytest.mark.parametrize("truncated", [False, True])
def test_n_step_returns_across_an_episode_end(truncated):
    # gamma 0.5, n 3; rewards 1..5 from obs 0..4, the fifth step ends the episode in obs 5.
    proc = NStepProcessor(n_envs=1, n_step=3, gamma=0.5)
    out = []
    for k in range(5):
        last = k == 4
        batch = proc.process(
            np.array([[k]], np.float32),
            np.array([k]),
            _step(
                k + 1,
                terminated=last and not truncated,
                truncated=last and truncated,
                next_obs=k + 1,
            ),
        )
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
    first = proc.process(obs, np.array([0, 0]), step)
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
    second = proc.process(obs + 1, np.array([1, 1]), step2)
    assert second.obs[:, 0].tolist() == [0.0]  # env 0's first 2-step window: 1 + 2
    assert second.reward.tolist() == [3.0] and second.next_obs[:, 0].tolist() == [2.0]


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
    """Plain per-env n-step transitions (one list per env): the definition, step by step."""
    windows = [[] for _ in range(n_envs)]
    out = []
    for obs, action, reward, terminated, truncated, next_obs in steps:
        full, ended = [], []
        for e in range(n_envs):
            windows[e].append((obs[e], action[e], reward[e]))
            if terminated[e] or truncated[e]:
                ended.append(e)
            elif len(windows[e]) == n_step:
                full.append(e)
        rows = []
        for e in full:
            rows.append((e, windows[e], 1.0))
        for e in ended:
            rows += [
                (e, windows[e][j:], 0.0 if terminated[e] else 1.0) for j in range(len(windows[e]))
            ]
        for e, window, end in rows:
            ret = sum(gamma**k * r for k, (_, _, r) in enumerate(window))
            out.append((window[0][0], window[0][1], ret, next_obs[e], end * gamma ** len(window)))
        for e in full:
            windows[e].pop(0)
        for e in ended:
            windows[e] = []
    return out


@pytest.mark.parametrize("n_step", [2, 3, 5])
@pytest.mark.parametrize("end_rate", [0.14, 0.01])  # often, and mostly steady (every window full)
def test_n_step_matches_the_definition_on_random_episodes_and_survives_a_checkpoint(
    n_step, end_rate
):
    rng = np.random.default_rng(n_step)
    n_envs, gamma = 6, 0.9
    steps = []
    for _ in range(300):
        obs = rng.normal(size=(n_envs, 2)).astype(np.float32)
        ends = rng.random(n_envs)
        steps.append(
            (
                obs,
                rng.integers(0, 4, n_envs),
                rng.normal(size=n_envs).astype(np.float32),
                ends < end_rate / 2,
                (ends >= end_rate / 2) & (ends < end_rate),
                rng.normal(size=(n_envs, 2)).astype(np.float32),
            )
        )
    expected = _reference_windows(n_envs, n_step, gamma, steps)
    proc = NStepProcessor(n_envs, n_step, gamma)
    got = []
    for t, (obs, action, reward, terminated, truncated, next_obs) in enumerate(steps):
        if t == 150:  # a checkpoint: a new processor continues from the old one's state
            state = proc.state()
            proc = NStepProcessor(n_envs, n_step, gamma)
            proc.load_state(state, np.dtype(np.float32))
        step = VectorStep(next_obs, next_obs, reward, terminated, truncated, [], [])
        batch = proc.process(obs, action, step)
        if batch is not None:
            got += zip(*batch.arrays().values(), strict=True)
    assert len(got) == len(expected)
    for (o, a, r, nxt, d), (eo, ea, er, enxt, ed) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(o, eo)
        assert a == ea
        assert r == pytest.approx(er, rel=1e-5, abs=1e-6)
        np.testing.assert_array_equal(nxt, enxt)
        assert d == pytest.approx(ed, rel=1e-6)
