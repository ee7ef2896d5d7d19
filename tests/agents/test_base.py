"""The agent contract (agents/base.py, agents/factory.py): capability protocols, the protocol check
of build_agent, per-env fixed epsilons, Adam's epsilon and hyper-parameter validation."""

from __future__ import annotations

import copy
import logging

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from border_py.agents.base import (
    Agent,
    ExplorationPosition,
    FixedEpsilon,
    TDErrorScoring,
    reports_td_error,
)
from border_py.agents.dqn import DQN
from border_py.agents.factory import build_agent
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.errors import ConfigError
from border_py.transitions import Transitions

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
THREE = gym.spaces.Discrete(3)
ACT = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _agents() -> dict[str, object]:
    return {
        "dqn": DQN(BOX, THREE, hidden_sizes=[8]),
        "iqn": IQN(BOX, THREE, hidden_sizes=[8], n_tau=2, n_tau_prime=2, k=2),
        "sac": SAC(BOX, ACT, hidden_sizes=[8]),
    }


def test_the_shipped_agents_declare_their_capabilities():
    agents = _agents()
    for name, agent in agents.items():
        assert isinstance(agent, Agent), name
        assert isinstance(agent, ExplorationPosition), name  # resumed actors continue exploring
    for name in ("dqn", "iqn"):
        assert isinstance(agents[name], FixedEpsilon) and isinstance(agents[name], TDErrorScoring)
        assert reports_td_error(agents[name])
    sac = agents["sac"]
    assert not isinstance(sac, FixedEpsilon) and not isinstance(sac, TDErrorScoring)
    assert not reports_td_error(sac)


class Incomplete:
    """A user's agent that forgot most of the protocol."""

    def __init__(self, observation_space, action_space, device, seed):
        self.gamma = 0.99

    def act(self, obs, explore):
        return np.zeros(len(obs), np.int64)


def test_build_agent_names_what_a_users_agent_lacks():
    config = {"agent": {"_target_": "tests.agents.test_base.Incomplete"}, "seed": 0}
    with pytest.raises(ConfigError) as err:
        build_agent(config, (BOX, THREE), "cpu", 0)
    message = str(err.value)
    assert message.startswith("agent._target_=tests.agents.test_base.Incomplete: lacks ")
    for member in ("batch_size", "load_policy_state", "n_step", "policy_state", "update"):
        assert member in message
    assert "act," not in message and "gamma" not in message and "\n" not in message


# -- fixed epsilons (Ape-X) ----------------------------------------------------------------------


def _always_action(agent: DQN, action: int) -> DQN:
    """Greedy action ``action`` whatever the observation."""
    with torch.no_grad():
        agent.q[-1].weight.zero_()
        agent.q[-1].bias.zero_()
        agent.q[-1].bias[action] = 1.0
    return agent


def test_per_env_epsilons_act_row_by_row():
    agent = _always_action(DQN(BOX, THREE, hidden_sizes=[8], seed=1), 2)
    agent.set_epsilon(np.array([0.0, 1.0, 0.0, 1.0]))
    obs = np.zeros((4, 3), np.float32)
    actions = np.stack([agent.act(obs, explore=True) for _ in range(600)])  # (600, 4)
    assert (actions[:, [0, 2]] == 2).all()  # epsilon 0: always greedy
    for row in (1, 3):  # epsilon 1: uniform over the 3 actions
        counts = np.bincount(actions[:, row], minlength=3)
        assert counts.min() > 150, counts
    assert agent.exploration_stats() == {"train/epsilon": 0.5}  # the mean of the per-env ones
    assert agent.env_steps == 600 * 4

    # one epsilon per row draws exactly what the same epsilon for all rows draws
    a = _always_action(DQN(BOX, THREE, hidden_sizes=[8], seed=3), 0)
    b = _always_action(DQN(BOX, THREE, hidden_sizes=[8], seed=3), 0)
    a.set_epsilon(0.3)
    b.set_epsilon(np.full(4, 0.3))
    for _ in range(20):
        np.testing.assert_array_equal(a.act(obs, explore=True), b.act(obs, explore=True))


def test_epsilon_greedy_explores_with_probability_epsilon_and_uniformly():
    # epsilon 0.3 over 3 actions, greedy action 1: P(1) = 0.7 + 0.1, P(0) = P(2) = 0.1
    agent = _always_action(DQN(BOX, THREE, hidden_sizes=[8], seed=5), 1)
    agent.set_epsilon(0.3)
    obs = np.zeros((50, 3), np.float32)
    actions = np.concatenate([agent.act(obs, explore=True) for _ in range(400)])  # 20k draws
    share = np.bincount(actions, minlength=3) / len(actions)
    np.testing.assert_allclose(share, [0.1, 0.8, 0.1], atol=0.012)  # 5 standard errors or less
    # a row's epsilon is its own: 0.9 and 0.05 explore 0.6 and 0.033 of the time (off greedy)
    agent.set_epsilon(np.array([0.9, 0.05] * 25))
    actions = np.stack([agent.act(obs, explore=True) for _ in range(400)])
    off_greedy = (actions != 1).mean(axis=0)
    assert abs(off_greedy[0::2].mean() - 0.6) < 0.02
    assert abs(off_greedy[1::2].mean() - 0.05 * 2 / 3) < 0.01


def test_per_env_epsilons_must_fit_the_batch_and_lie_in_0_1():
    agent = IQN(BOX, THREE, hidden_sizes=[8], n_tau=2, n_tau_prime=2, k=2)
    agent.set_epsilon(np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="2 per-env epsilons for a batch of 3 envs"):
        agent.act(np.zeros((3, 3), np.float32), explore=True)
    assert agent.act(np.zeros((2, 3), np.float32), explore=True).shape == (2,)
    with pytest.raises(ValueError, match="must be in"):
        agent.set_epsilon(1.5)
    with pytest.raises(ValueError, match="must be in"):
        agent.set_epsilon(np.array([0.1, -0.1]))


# -- Adam's epsilon and hyper-parameter validation -------------------------------------------------


# agent -> (a builder, its optimizers by name with the key of each one's lr)
OPTIMIZED = {
    "dqn": (lambda **kw: DQN(BOX, THREE, hidden_sizes=[8], **kw), {"q": "lr"}),
    "iqn": (
        lambda **kw: IQN(BOX, THREE, hidden_sizes=[8], n_tau=2, n_tau_prime=2, k=2, **kw),
        {"z": "lr"},
    ),
    "sac": (
        lambda **kw: SAC(BOX, ACT, hidden_sizes=[8], **kw),
        {"actor": "actor_lr", "critic": "critic_lr", "alpha": "alpha_lr"},
    ),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZED))
def test_a_loaded_state_keeps_the_configured_lrs_and_eps(name, caplog):
    """A resume's ``agent.lr=...`` (or ``actor_lr``, ``adam_eps``...) is what trains: the config
    wins over the checkpoint's values, and the change is logged."""
    build, lr_keys = OPTIMIZED[name]
    saved = build(**dict.fromkeys(lr_keys.values(), 1e-3), adam_eps=1e-8).state_dict()
    configured = {key: 1e-4 * (i + 1) for i, key in enumerate(lr_keys.values())}
    agent = build(**configured, adam_eps=1.5e-4)
    with caplog.at_level(logging.INFO, logger="border_py.agents.optim"):
        agent.load_state_dict(saved)
    for optimizer, key in lr_keys.items():
        assert (agent.optimizers[optimizer].lr, agent.optimizers[optimizer].eps) == (
            configured[key],
            1.5e-4,
        )
        assert f"optimizer {optimizer}: lr 0.001 -> {configured[key]:g} (the config's)" in (
            caplog.text
        )
        assert f"optimizer {optimizer}: eps 1e-08 -> 0.00015 (the config's)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="border_py.agents.optim"):
        build(**dict.fromkeys(lr_keys.values(), 1e-3), adam_eps=1e-8).load_state_dict(saved)
    assert "optimizer" not in caplog.text  # nothing changed, nothing said


@pytest.mark.slow
def test_adam_eps_reaches_every_optimizer_and_sets_the_first_step():
    dqn = DQN(BOX, THREE, hidden_sizes=[], lr=0.1, adam_eps=0.5, loss="mse", max_grad_norm=None)
    assert dqn.optimizers["q"].eps == 0.5
    sac = SAC(BOX, ACT, hidden_sizes=[8], adam_eps=3.125e-4)
    assert {opt.eps for opt in sac.optimizers.values()} == {3.125e-4}
    assert DQN(BOX, THREE).optimizers["q"].eps == 1e-8  # torch's default

    # Adam's first step is lr * g / (|g| + eps) per parameter (bias corrections cancel)
    rng = np.random.default_rng(0)
    batch = Transitions(
        rng.normal(size=(4, 3)).astype(np.float32),
        np.array([0, 1, 2, 0]),
        rng.normal(size=4).astype(np.float32),
        rng.normal(size=(4, 3)).astype(np.float32),
        np.full(4, 0.9, np.float32),
    )
    q = copy.deepcopy(dqn.q)
    obs, next_obs = torch.tensor(batch.obs), torch.tensor(batch.next_obs)
    with torch.no_grad():
        next_q_online, next_q_target = dqn.q(next_obs), dqn.q_target(next_obs)
        best = next_q_online.argmax(1, keepdim=True)  # double DQN (the default)
        y = torch.tensor(batch.reward) + torch.tensor(batch.discount) * next_q_target.gather(
            1, best
        ).squeeze(1)
    taken = q(obs).gather(1, torch.tensor(batch.action)[:, None]).squeeze(1)
    F.mse_loss(taken, y).backward()
    expected = [p.detach() - 0.1 * p.grad / (p.grad.abs() + 0.5) for p in q.parameters()]
    dqn.update(batch)
    for after, want in zip(dqn.q.parameters(), expected, strict=True):
        torch.testing.assert_close(after.detach(), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: DQN(BOX, THREE, adam_eps=0), "adam_eps=0: must be a positive float"),
        (lambda: IQN(BOX, THREE, adam_eps=-1e-8), "adam_eps=-1e-08: must be a positive float"),
        (lambda: SAC(BOX, ACT, adam_eps="x"), "adam_eps='x': must be a positive float"),
        (lambda: DQN(BOX, THREE, tau=0), "tau=0: must be in (0, 1]"),
        (lambda: DQN(BOX, THREE, loss="l1"), "loss='l1': must be 'huber' or 'mse'"),
        (
            lambda: DQN(BOX, THREE, max_grad_norm=0),
            "max_grad_norm=0: must be null or a positive float",
        ),
    ],
)
def test_bad_hyper_parameters_are_one_line(make, expected):
    with pytest.raises(ConfigError) as err:
        make()
    assert str(err.value) == expected
