"""Algorithm pieces on hand-checked numbers: DQN targets, epsilon, n-step returns, replay."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.actors.nstep import NStepProcessor
from border_py.actors.sampler import Sampler, SampleStats
from border_py.agents.dqn import DQN, dqn_targets, linear_epsilon
from border_py.envs.factory import GymEnvFactory
from border_py.envs.vector import VectorStep
from border_py.replay.uniform import UniformReplayBuffer
from border_py.transitions import Transitions


def test_dqn_targets_double_and_vanilla_by_hand():
    reward = torch.tensor([1.0, 1.0])
    discount = torch.tensor([0.99, 0.0])  # second transition ended in a terminal state
    next_q_online = torch.tensor([[1.0, 3.0], [2.0, 0.0]])
    next_q_target = torch.tensor([[5.0, 2.0], [4.0, 7.0]])
    # double DQN: a* = argmax online = [1, 0]; values from the target net = [2, 4]
    double = dqn_targets(reward, discount, next_q_online, next_q_target, double_dqn=True)
    assert double.tolist() == pytest.approx([1 + 0.99 * 2, 1.0])
    # DQN: max of the target net = [5, 7]
    vanilla = dqn_targets(reward, discount, next_q_online, next_q_target, double_dqn=False)
    assert vanilla.tolist() == pytest.approx([1 + 0.99 * 5, 1.0])


def _batch(obs, action, reward, next_obs, discount) -> Transitions:
    f = np.float32
    return Transitions(
        np.asarray(obs, f),
        np.asarray(action),
        np.asarray(reward, f),
        np.asarray(next_obs, f),
        np.asarray(discount, f),
    )


def test_dqn_update_minimizes_the_hand_computed_loss():
    space = gym.spaces.Box(-1, 1, (2,))
    agent = DQN(
        space,
        gym.spaces.Discrete(2),
        hidden_sizes=[8],
        loss="mse",
        double_dqn=False,
        lr=1e-2,
        max_grad_norm=None,
    )
    batch = _batch(
        [[0.1, 0.2], [0.3, -0.4]], [0, 1], [1.0, -1.0], [[0.5, 0.5], [0.0, 0.1]], [0.9, 0.0]
    )
    with torch.no_grad():
        q = agent.q(torch.tensor(batch.obs))[[0, 1], [0, 1]]
        next_max = agent.q_target(torch.tensor(batch.next_obs)).max(1).values
        expected = (
            (q - (torch.tensor(batch.reward) + torch.tensor(batch.discount) * next_max)) ** 2
        ).mean()
    metrics = agent.update(batch)
    assert float(metrics["train/loss"]) == pytest.approx(float(expected), rel=1e-5)
    assert float(metrics["train/q_mean"]) == pytest.approx(float(q.mean()), rel=1e-5)
    for _ in range(200):
        last = float(agent.update(batch)["train/loss"])
    assert last < float(expected) / 2


def test_target_network_hard_copy_and_polyak():
    space, actions = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)
    batch = _batch(np.ones((4, 3)), [0, 1, 0, 1], np.ones(4), np.zeros((4, 3)), np.full(4, 0.9))
    hard = DQN(space, actions, hidden_sizes=[4], target_update_interval=3)
    before = [p.clone() for p in hard.q_target.parameters()]
    hard.update(batch)
    hard.update(batch)
    assert all(torch.equal(a, b) for a, b in zip(before, hard.q_target.parameters(), strict=True))
    hard.update(batch)  # third opt step: hard copy
    assert all(
        torch.equal(a, b)
        for a, b in zip(hard.q.parameters(), hard.q_target.parameters(), strict=True)
    )

    soft = DQN(space, actions, hidden_sizes=[4], tau=0.1)
    target_before = [p.clone() for p in soft.q_target.parameters()]
    soft.update(batch)
    for t0, t1, q in zip(
        target_before, soft.q_target.parameters(), soft.q.parameters(), strict=True
    ):
        torch.testing.assert_close(t1, 0.9 * t0 + 0.1 * q.detach())


def test_epsilon_schedule_is_linear_in_env_steps():
    assert linear_epsilon(0, 1.0, 0.1, 10) == 1.0
    assert linear_epsilon(5, 1.0, 0.1, 10) == pytest.approx(0.55)
    assert linear_epsilon(10, 1.0, 0.1, 10) == pytest.approx(0.1)
    assert linear_epsilon(1000, 1.0, 0.1, 10) == pytest.approx(0.1)
    agent = DQN(
        gym.spaces.Box(-1, 1, (2,)),
        gym.spaces.Discrete(3),
        eps_start=1.0,
        eps_final=0.0,
        eps_decay_steps=4,
    )
    agent.act(np.zeros((2, 2), np.float32), explore=True)  # two envs: two env steps
    assert agent.epsilon == pytest.approx(0.5)
    agent.act(np.zeros((1, 2), np.float32), explore=False)  # greedy acting does not advance it
    assert agent.epsilon == pytest.approx(0.5)


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
