"""agents/discrete.py: the prelude DQN and IQN share (spaces, hyper-parameters, exploration, one
seeded online network with its target copy and optimizer), written once."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.discrete import DiscreteValueAgent
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.errors import ConfigError

OBS = gym.spaces.Box(-1, 1, (4,), np.float32)
ACTIONS = gym.spaces.Discrete(3)


@pytest.mark.parametrize("agent_class", [DQN, IQN])
def test_the_prelude_is_one_for_both(agent_class):
    assert issubclass(agent_class, DiscreteValueAgent)
    before = torch.random.get_rng_state()
    agent = agent_class(OBS, ACTIONS, seed=3, hidden_sizes=[8], gamma=0.9, n_step=3, lr=5e-4)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global stream untouched
    online, target = (getattr(agent, agent.acting_module + end) for end in ("", "_target"))
    again = agent_class(OBS, ACTIONS, seed=3, hidden_sizes=[8])
    weights = online.state_dict()
    assert all(
        torch.equal(w, getattr(again, agent.acting_module).state_dict()[k])
        for k, w in weights.items()
    )
    assert all(torch.equal(w, target.state_dict()[k]) for k, w in weights.items())
    assert not any(p.requires_grad for p in target.parameters())
    (optimizer,) = agent.optimizers.values()
    assert list(agent.optimizers) == [agent.acting_module] and optimizer.lr == 5e-4
    assert (agent.gamma, agent.n_step, agent.batch_size, agent.n_actions) == (0.9, 3, 64, 3)
    assert agent.device == torch.device("cpu") and agent.opt_steps == 0 and agent.epsilon == 1.0


@pytest.mark.parametrize("agent_class", [DQN, IQN])
def test_spaces_are_checked_before_the_hyper_parameters(agent_class):
    box = gym.spaces.Box(-1, 1, (2,), np.float32)
    with pytest.raises(ConfigError, match="action space"):
        agent_class(OBS, box, lr=-1.0)
    with pytest.raises(ConfigError, match="lr"):
        agent_class(OBS, ACTIONS, lr=-1.0)
