"""``my_pkg.env``: the envs the docs register (``MyEnv-v0``, ``DictEnv-v0``)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from tiny_rl.env import Corridor


class MyEnv(Corridor):
    """examples/tiny_rl's Corridor under the docs' name."""


class DictEnv(gym.ObservationWrapper):
    """Corridor whose observation is a Dict (what ``FlattenObservation`` turns into a Box)."""

    def __init__(self) -> None:
        super().__init__(Corridor())
        self.observation_space = gym.spaces.Dict({"position": self.env.observation_space})

    def observation(self, observation: np.ndarray) -> dict:
        return {"position": observation}
