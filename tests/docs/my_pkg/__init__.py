"""``my_pkg``, the package the docs' own-agent walkthrough builds, for ``tests/docs/test_docs.py``:
examples/tiny_rl's agent and env under the names the docs use. Importing it registers the env."""

import gymnasium as gym
from my_pkg.agent import MyAgent

gym.register(id="MyEnv-v0", entry_point="my_pkg.env:MyEnv", max_episode_steps=200)
gym.register(id="DictEnv-v0", entry_point="my_pkg.env:DictEnv", max_episode_steps=50)

__all__ = ["MyAgent"]
