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
