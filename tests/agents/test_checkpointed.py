"""Declared agent parts (agents/checkpointed.py) and hyper-parameter dataclasses (agents/hparams.py):
the saved keys are the checkpoint format, and the dataclass's fields are the agent's config keys."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

from border_py.agents.dqn import DQN, DQNArgs
from border_py.agents.iqn import IQN, IQNArgs
from border_py.agents.r2d2 import R2D2, R2D2Args
from border_py.agents.sac import SAC, SACArgs
from border_py.config import build, config_keys

BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
THREE = gym.spaces.Discrete(3)
ACT = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
AGENTS = {  # agent -> (class, its dataclass, its action space, the keys trainer.pt holds)
    "dqn": (DQN, DQNArgs, THREE, ["q", "q_target", "optimizer", "env_steps", "opt_steps", "rng"]),
    "r2d2": (
        R2D2,
        R2D2Args,
        THREE,
        ["q", "q_target", "optimizer", "env_steps", "opt_steps", "rng"],
    ),
    "iqn": (
        IQN,
        IQNArgs,
        THREE,
        ["z", "z_target", "optimizer", "env_steps", "opt_steps", "rng", "tau_rng"],
    ),
    "sac": (
        SAC,
        SACArgs,
        ACT,
        [
            "policy",
            "critics",
            "critic_targets",
            "log_alpha",
            "optimizers",
            "env_steps",
            "opt_steps",
            "rng",
            "generator",
            "noise",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_the_saved_keys_are_the_declared_ones_and_stay_the_format(name):
    agent_class, _, action_space, keys = AGENTS[name]
    agent = agent_class(BOX, action_space, hidden_sizes=[4])
    assert list(agent.state_dict()) == list(agent_class.checkpointed) == keys
    other = agent_class(BOX, action_space, hidden_sizes=[4], seed=1)
    other.load_state_dict(agent.state_dict())
    for key, value in agent.policy_state().items():
        assert (other.policy_state()[key] == value).all()


def test_an_optional_part_missing_from_an_older_checkpoint_restores_none():
    agent = SAC(BOX, ACT, hidden_sizes=[4], noise_correlation=0.5, random_steps=0)
    agent.act(np.zeros((2, 3), np.float32), explore=True)
    saved = agent.state_dict()
    assert saved["noise"] is not None
    del saved["noise"]  # checkpoints before noise_correlation
    agent.load_state_dict(saved)
    assert agent.noise is None


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_the_dataclass_fields_are_the_config_keys_with_their_defaults(name):
    agent_class, args_class, action_space, _ = AGENTS[name]
    fields = dataclasses.fields(args_class)
    assert config_keys(agent_class, "agent") == [field.name for field in fields]
    agent = agent_class(BOX, action_space, hidden_sizes=[4])
    assert agent.args == args_class(hidden_sizes=[4])
    built = build(
        "agent",
        {"_target_": f"{agent_class.__module__}.{agent_class.__name__}", "batch_size": 3e1},
        observation_space=BOX,
        action_space=action_space,
        device="cpu",
        seed=0,
    )
    assert built.batch_size == 30 and type(built.args.batch_size) is int  # by the field's type
