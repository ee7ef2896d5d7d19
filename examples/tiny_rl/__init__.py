"""A tiny reference package for border-py: a Q-learning agent written from scratch against the
agent contract (docs/05-customization/agents.md) and a small gymnasium env, with their Hydra
configs in ``conf/``.

Importing the package registers the env, so ``env.id=tiny_rl:Corridor-v0`` works anywhere.
"""

import gymnasium as gym

gym.register(id="Corridor-v0", entry_point="tiny_rl.env:Corridor", max_episode_steps=50)
