"""DQN on hand-checked numbers: targets, the loss, target updates, the epsilon schedule."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.dqn import DQN, dqn_targets, linear_epsilon
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


@pytest.mark.slow
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
