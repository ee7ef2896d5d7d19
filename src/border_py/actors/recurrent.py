"""An actor's memory: each env's recurrent state, previous action and previous reward, carried
from step to step and reset at every episode start, and the sequences cut from what it acted on.

The sampler (:mod:`border_py.actors.sampler`) steps a recurrent agent
(:class:`~border_py.agents.base.RecurrentActing`) through a :class:`RecurrentStream`: before an
env step :meth:`RecurrentStream.act` asks the agent for actions with each env's state, previous
action and reward; after it :meth:`RecurrentStream.add` hands the step, with the states the envs
acted with, to the :class:`~border_py.actors.sequencer.SequenceBuilder` and moves each env on: the
state the agent returned, the action taken and the reward that followed, or zeros, -1 and 0.0
where the step ended the env's episode (the vector env resets it in the same step, so the next
observation is the new episode's first). R2D2 steps its network in numpy for this
(:mod:`border_py.agents.recurrent_inference`: several times faster than the torch module's step on
an actor's handful of envs; ``benchmarks/recurrent_throughput.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from border_py.actors.sequencer import SequenceBuilder
from border_py.agents.base import RecurrentActing
from border_py.envs.vector import VectorStep
from border_py.sequences import Sequences

__all__ = ["RecurrentStream"]


class RecurrentStream:
    """The recurrent state of ``n_envs`` envs acted on together, and their sequences.

    Args:
        agent: a recurrent agent; its ``burn_in``, ``length`` and ``period`` shape the sequences.
        n_envs: envs stepped together (all at an episode's first step).
        gamma: the agent's discount factor (of the sequences' n-step targets).
        n_step: the agent's rewards per target.
        stream: the sequence keys' stream of env 0 (see
            :class:`~border_py.actors.sequencer.SequenceBuilder`).
    """

    def __init__(
        self, agent: RecurrentActing, n_envs: int, gamma: float, n_step: int, stream: int = 0
    ) -> None:
        self.agent = agent
        self.memory = agent.initial_state(n_envs)  # each env's state before its next step
        self.prev_action = np.full(n_envs, -1, dtype=np.int64)
        self.prev_reward = np.zeros(n_envs, dtype=np.float32)
        self.builder = SequenceBuilder(
            n_envs,
            agent.burn_in,
            agent.length,
            agent.period,
            n_step,
            gamma,
            self.memory.shape[1:],
            stream,
        )
        self._next: np.ndarray | None = None  # the states act() returned, until add()

    def act(self, obs: np.ndarray) -> np.ndarray:
        """The exploring actions for ``obs`` (advances the agent's exploration schedule)."""
        action, self._next = self.agent.act_recurrent(
            obs, self.memory, self.prev_action, self.prev_reward, explore=True
        )
        return action

    def add(self, obs: np.ndarray, action: np.ndarray, step: VectorStep) -> None:
        """Record that the envs in ``obs`` took :meth:`act`'s ``action`` and ``step`` followed;
        each env's memory moves on (to an episode start's where the step ended its episode)."""
        if self._next is None:
            raise RuntimeError("act() before add(): the states the envs move on to come from it")
        self.builder.add(obs, self.memory, action, step)
        self.memory = np.array(self._next, dtype=np.float32)
        self.prev_action = np.array(action, dtype=np.int64)
        self.prev_reward = np.array(step.reward, dtype=np.float32)
        self._next = None
        done = step.terminated | step.truncated
        if done.any():
            self.memory[done] = 0.0
            self.prev_action[done] = -1
            self.prev_reward[done] = 0.0

    def take(self) -> Sequences | None:
        """The sequences the steps since the last take made ready (None if none)."""
        return self.builder.take()

    def state(self) -> dict[str, Any]:
        """Each env's memory and the pending windows as plain data (for checkpoints: float32
        values round-trip exactly through Python floats).

        Raises:
            RuntimeError: sequences are ready and not taken.
        """
        return {
            "memory": self.memory.tolist(),
            "prev_action": self.prev_action.tolist(),
            "prev_reward": self.prev_reward.tolist(),
            "windows": self.builder.state(),
        }

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from :meth:`state`.

        Raises:
            ValueError: ``saved`` holds other envs, another state shape or other sequence
                settings.
        """
        memory = np.array(saved["memory"], dtype=np.float32)
        if memory.shape != self.memory.shape:
            raise ValueError(
                f"the checkpoint's recurrent states are {memory.shape}, the actor's"
                f" {self.memory.shape}"
            )
        n = len(memory)
        prev_action = np.array(saved["prev_action"], dtype=np.int64).reshape(n)
        prev_reward = np.array(saved["prev_reward"], dtype=np.float32).reshape(n)
        self.builder.restore(saved["windows"])
        self.memory, self.prev_action, self.prev_reward = memory, prev_action, prev_reward
        self._next = None
