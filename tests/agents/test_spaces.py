"""agents/spaces.py: an env whose spaces the agent does not take fails before anything starts, in
one line naming the gymnasium wrapper that fixes it; the named wrappers really do."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import FlattenObservation, TransformAction

from border_py.agents.base import Accepts
from border_py.agents.dqn import DQN
from border_py.agents.factory import build_agent
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.agents.spaces import check_spaces
from border_py.cli.train import check_overrides
from border_py.errors import ConfigError

DiscretizeAction = getattr(gym.wrappers, "DiscretizeAction", None)  # gymnasium >= 1.3
NEWER = "" if DiscretizeAction else "; gymnasium >= 1.3"  # the hint says where it is
BOX = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
TWO = gym.spaces.Discrete(2)
BOUNDED = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
UNBOUNDED = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
FLATTEN = "env.wrappers=[{_target_: gymnasium.wrappers.FlattenObservation}]"
OBSERVATIONS = {
    "dict": gym.spaces.Dict({"position": BOX, "flag": TWO}),
    "tuple": gym.spaces.Tuple((BOX, TWO)),
    "discrete": gym.spaces.Discrete(5),
    "multi_discrete": gym.spaces.MultiDiscrete([3, 4]),
    "multi_binary": gym.spaces.MultiBinary(4),
}


def _refusal(agent_class: type, obs: gym.Space, act: gym.Space) -> str:
    with pytest.raises(ConfigError) as err:
        check_spaces(agent_class, obs, act)
    message = str(err.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("agent_class", [DQN, IQN, SAC])
@pytest.mark.parametrize("kind", sorted(OBSERVATIONS))
def test_observations_that_flatten_into_a_box_name_flatten_observation(agent_class, kind):
    act = BOUNDED if agent_class is SAC else TWO
    message = _refusal(agent_class, OBSERVATIONS[kind], act)
    assert message.startswith(f"_target_: {agent_class.__name__} needs Box observations, the env")
    assert message.endswith(f"flatten them into a Box: {FLATTEN}")
    # the named wrapper fixes it
    flat = FlattenObservation(_Env(OBSERVATIONS[kind], act)).observation_space
    check_spaces(agent_class, flat, act)


class _Env(gym.Env):
    """An env with the given spaces (for applying wrappers to)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.observation_space, self.action_space = observation_space, action_space


@pytest.mark.parametrize("agent_class", [DQN, IQN])
def test_discrete_agents_on_box_actions_name_discretize_action(agent_class):
    name = agent_class.__name__
    message = _refusal(agent_class, BOX, BOUNDED)
    assert message.startswith(f"_target_: {name} needs a Discrete action space, the env has Box")
    assert (
        f"env.wrappers=[{{_target_: gymnasium.wrappers.DiscretizeAction, bins: 5}}]{NEWER}"
        in message
    )
    assert message.endswith("or use agent=sac")
    if DiscretizeAction is not None:
        check_spaces(agent_class, BOX, DiscretizeAction(_Env(BOX, BOUNDED), bins=5).action_space)
    unbounded = _refusal(agent_class, BOX, UNBOUNDED)
    assert "its bounds are infinite" in unbounded and "TransformAction" in unbounded


def test_sac_names_what_bounds_its_actions():
    message = _refusal(SAC, BOX, UNBOUNDED)
    assert message.startswith(
        "_target_: SAC needs a continuous (Box) action space with finite bounds, the env has"
        " Box(-inf, inf, (2,), float32); declare the range to act in: env.wrappers=[{_target_:"
        " gymnasium.wrappers.TransformAction, func: {_target_: numpy.asarray, _partial_: true},"
        " action_space: {_target_: gymnasium.spaces.Box, low: -1.0, high: 1.0, shape: [2]}}]"
    )
    # what that override builds gives SAC a space it takes (RescaleAction/ClipAction would not)
    wrapped = TransformAction(
        _Env(BOX, UNBOUNDED), func=np.asarray, action_space=gym.spaces.Box(-1.0, 1.0, shape=[2])
    )
    check_spaces(SAC, BOX, wrapped.action_space)
    assert _refusal(SAC, BOX, TWO).endswith(
        "the env has Discrete(2) (for discrete actions use agent=dqn)"
    )


class Recorder(DQN):
    """A DQN that counts its instances."""

    built = 0

    def __init__(self, *args, **kwargs) -> None:
        Recorder.built += 1
        super().__init__(*args, **kwargs)


class Undeclared:
    """A user's class that declares no spaces: not checked."""


def test_build_agent_checks_before_building_and_only_declared_classes():
    config = {"agent": {"_target_": "tests.agents.test_spaces.Recorder"}, "seed": 0}
    with pytest.raises(ConfigError, match=r"^agent\._target_: Recorder needs Box observations"):
        build_agent(config, (OBSERVATIONS["dict"], TWO), "cpu", 0)
    assert Recorder.built == 0  # refused before the agent was built
    build_agent(config, (BOX, TWO), "cpu", 0)
    assert Recorder.built == 1
    check_spaces(Undeclared, OBSERVATIONS["dict"], UNBOUNDED)


def test_a_subclass_may_declare_other_spaces():
    class AnyActions(DQN):
        accepts = Accepts(action=(gym.spaces.Discrete, gym.spaces.MultiDiscrete))

    message = _refusal(AnyActions, BOX, BOUNDED)
    assert message.startswith("_target_: AnyActions needs a Discrete or MultiDiscrete action space")


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (  # Blackjack's observations are a Tuple of Discrete spaces
            ["env=gym", "env.id=Blackjack-v1"],
            f"agent._target_: DQN needs Box observations, the env has Tuple(Discrete(32),"
            f" Discrete(11), Discrete(2)); flatten them into a Box: {FLATTEN}",
        ),
        (
            ["agent=iqn", "env=pendulum"],
            "agent._target_: IQN needs a Discrete action space, the env has Box(-2.0, 2.0, (1,),"
            " float32); discretize it (env.wrappers=[{_target_: gymnasium.wrappers.DiscretizeAction,"
            f" bins: 5}}]{NEWER}: 5 bins per dimension) or use agent=sac",
        ),
    ],
)
def test_the_cli_refuses_before_anything_starts(overrides, expected):
    with pytest.raises(ConfigError) as err:
        check_overrides(overrides)
    assert str(err.value) == expected
