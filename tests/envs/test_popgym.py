"""env=popgym: POPGym's ids registered, discrete observations one-hot as float32 Boxes."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from border_py.envs.popgym import OneHotObservation, PopGymEnvFactory
from border_py.errors import ConfigError


class Fixed(gym.Env):
    """An env that observes one given value of a given space."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, space: gym.Space, value) -> None:
        self.observation_space, self.value = space, value

    def reset(self, *, seed=None, options=None):
        return self.value, {}

    def step(self, action):
        return self.value, 0.0, True, False, {}


@pytest.mark.parametrize(
    ("space", "value", "expected"),
    [
        (gym.spaces.Discrete(4), 2, [0, 0, 1, 0]),
        (gym.spaces.Discrete(3, start=-1), 1, [0, 0, 1]),
        (gym.spaces.MultiDiscrete([2, 3]), np.array([1, 0]), [0, 1, 1, 0, 0]),
        (
            gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-2, 2, (2,)))),
            (0, np.array([0.5, -1.5], dtype=np.float32)),
            [1, 0, 0.5, -1.5],
        ),
    ],
)
def test_discrete_parts_become_one_hot_float_blocks(space, value, expected):
    env = OneHotObservation(Fixed(space, value))
    obs, _ = env.reset()
    assert obs.dtype == np.float32 and env.observation_space.dtype == np.float32
    np.testing.assert_array_equal(obs, np.asarray(expected, dtype=np.float32))
    assert env.observation_space.contains(obs)


def test_other_observations_are_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"^env: OneHotObservation takes Discrete, MultiDiscrete"):
        OneHotObservation(Fixed(gym.spaces.Text(4), "ab"))


def test_the_factory_makes_popgym_tasks_with_one_hot_observations():
    factory = PopGymEnvFactory("popgym-RepeatPreviousEasy-v0")
    obs_space, act_space = factory.spaces()
    assert obs_space == gym.spaces.Box(0.0, 1.0, (4,), np.float32) and act_space.n == 4
    env = factory.make()
    obs, _ = env.reset(seed=0)
    assert obs.sum() == 1.0
    env.close()
    with pytest.raises(ConfigError, match=r"^id='CartPole-v1': must be a POPGym id"):
        PopGymEnvFactory("CartPole-v1")
