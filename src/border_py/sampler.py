"""The sampler: turns a policy and vector envs into n-step transitions.

The same :class:`Sampler` runs in-process for the serial trainer and inside each actor process of
the async trainer, so both produce transitions the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from border_py.agents.base import Agent
from border_py.envs import GymEnvFactory, VectorEnv
from border_py.transitions import NStepProcessor, Transitions


@dataclass
class SampleStats:
    """What happened while sampling: env steps taken and episodes finished."""

    env_steps: int = 0
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)


class Sampler:
    """Steps a vector env with an agent's exploring policy and emits n-step transitions.

    Args:
        env_factory: builds the envs.
        agent: acts (``explore=True``) and defines ``gamma`` and ``n_step``.
        n_envs: envs stepped together.
        seed: seed of the envs' first reset (env ``i`` gets ``seed + i``).
        replayable: keep what :meth:`state` needs to checkpoint the envs (a little work per step).
    """

    def __init__(
        self,
        env_factory: GymEnvFactory,
        agent: Agent,
        n_envs: int,
        seed: int,
        replayable: bool = False,
    ) -> None:
        self.agent = agent
        self.env: VectorEnv = env_factory.make_vector(n_envs, seed, replayable)
        self.processor = NStepProcessor(n_envs, agent.n_step, agent.gamma)

    def step(self, stats: SampleStats) -> Transitions | None:
        """One batched policy call and one step of every env; returns finished transitions."""
        obs = self.env.obs
        action = self.agent.act(obs, explore=True)
        step = self.env.step(action)
        stats.env_steps += self.env.num_envs
        stats.episode_returns += step.episode_returns
        stats.episode_lengths += step.episode_lengths
        return self.processor.process(obs, action, step)

    def sample(self, min_transitions: int, stats: SampleStats) -> Transitions:
        """Step until at least ``min_transitions`` transitions are ready; return them in one batch."""
        parts: list[Transitions] = []
        ready = 0
        while ready < min_transitions:
            out = self.step(stats)
            if out is not None:
                parts.append(out)
                ready += len(out)
        return Transitions.concat(parts)

    def state(self) -> dict[str, Any]:
        """Env and n-step state as plain data (for checkpoints)."""
        return {"env": self.env.state(), "pending": self.processor.state()}

    def restore(self, state: dict[str, Any]) -> None:
        """Put envs and pending n-step windows back as :meth:`state` saw them."""
        self.env.restore(state["env"])
        self.processor.load_state(state["pending"], self.env.obs.dtype)

    def close(self) -> None:
        """Close the envs."""
        self.env.close()


def episode_summary(returns: list[float], lengths: list[int]) -> dict[str, float]:
    """Mean episode return and length as ``actor/`` scalars (empty when no episode ended)."""
    if not returns:
        return {}
    return {
        "actor/episode_return": float(np.mean(returns)),
        "actor/episode_length": float(np.mean(lengths)),
    }
