"""``my_pkg.agent.MyAgent``: examples/tiny_rl's TinyQ with the parameters the docs' error lines
name (``hidden, lr, gamma, n_step, batch_size``)."""

from __future__ import annotations

import gymnasium as gym
from tiny_rl.agent import TinyQ


class MyAgent(TinyQ):
    """TinyQ with its exploration and target settings left at their defaults."""

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str = "cpu",
        seed: int = 0,
        hidden: int = 64,
        lr: float = 1e-3,
        gamma: float = 0.99,
        n_step: int = 1,
        batch_size: int = 64,
    ) -> None:
        super().__init__(
            observation_space,
            action_space,
            device=device,
            seed=seed,
            hidden=hidden,
            lr=lr,
            gamma=gamma,
            n_step=n_step,
            batch_size=batch_size,
        )
