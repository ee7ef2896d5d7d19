"""The sampler: turns a policy and vector envs into n-step transitions, or a recurrent agent
(:class:`~border_py.agents.base.RecurrentActing`) and vector envs into sequences
(:mod:`border_py.actors.recurrent`).

The same :class:`Sampler` runs in-process for the serial trainer and inside each actor process of
the async trainer, so both produce transitions the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from border_py.actors.clock import RunClock
from border_py.actors.frames import FrameEncoder
from border_py.actors.nstep import NStepProcessor
from border_py.actors.recurrent import RecurrentStream
from border_py.actors.values import ActedValueScorer
from border_py.agents.base import (
    Agent,
    ExplorationPosition,
    RecurrentActing,
    TDErrorScoring,
    ValueActing,
)
from border_py.agents.contract import check_actions
from border_py.envs.factory import GymEnvFactory
from border_py.envs.vector import BatchedEnv, VectorEnv
from border_py.sequences import Sequences
from border_py.transitions import Transitions

__all__ = ["Batch", "SampleStats", "Sampler", "sampler_options"]

Batch = Transitions | Sequences  # what a sampler emits: a recurrent agent's are sequences

log = logging.getLogger(__name__)


@dataclass
class SampleStats:
    """What happened while sampling: env steps taken and episodes finished."""

    env_steps: int = 0
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)


def sampler_options(config: dict[str, Any]) -> dict[str, Any]:
    """What the replay buffer of the resolved ``config`` needs from the samplers that feed it."""
    rb = config["replay_buffer"]
    return {
        "frame_stack": rb.get("frame_stack"),
        "priorities": bool(rb.get("priority_from_actors", False)),
    }


class Sampler:
    """Steps a vector env with an agent's exploring policy and emits n-step transitions (a
    recurrent agent's: sequences, each env's recurrent state carried from step to step).

    Args:
        env_factory: builds the envs.
        agent: acts (``explore=True``) and defines ``gamma`` and ``n_step``.
        n_envs: envs stepped together.
        seed: seed of the envs' first reset (env ``i`` gets ``seed + i``); also names this
            sampler's stream of frames, and of a recurrent agent's sequences (their keys'
            streams are ``seed * n_envs + i``: distinct for distinct seeds).
        replayable: keep what :meth:`state` needs to checkpoint the envs (a little work per step).
        frame_stack: null, or ``k``: send each new frame of the stacked observations once
            (:class:`~border_py.actors.frames.FrameEncoder`); transitions then carry frame ids and the
            frames they need (``replay_buffer.frame_stack``).
        priorities: attach the agent's TD error of each emitted batch as its ``priority``
            (``replay_buffer.priority_from_actors``): with frames and an agent that acts on
            values it hands out (:class:`~border_py.agents.base.ValueActing`), from the values it
            acted on (:mod:`border_py.actors.values`), else from its ``td_error``.
        clock: the run's env steps, all actors together (:mod:`border_py.actors.clock`): before
            each exploring policy call an agent with ``set_exploration_step`` is moved to its
            position, and each env step advances it (None: the agent counts its own steps).
    """

    def __init__(
        self,
        env_factory: GymEnvFactory,
        agent: Agent,
        n_envs: int,
        seed: int,
        replayable: bool = False,
        frame_stack: int | None = None,
        priorities: bool = False,
        clock: RunClock | None = None,
    ) -> None:
        self.agent = agent
        self.clock = clock
        self._move_schedule: Callable[[int], None] | None = None  # checked once, not per step
        if clock is not None and isinstance(agent, ExplorationPosition):
            self._move_schedule = agent.set_exploration_step
        self.priorities = priorities
        self.seed, self.frame_stack = seed, frame_stack
        self.env: BatchedEnv = env_factory.make_vector(n_envs, seed, replayable)
        self.acted = False  # the first actions are checked (check_actions), no later ones
        self._start_windows(first_frame=0)

    def _start_windows(self, first_frame: int) -> None:
        """Empty n-step windows (and frame ids from ``first_frame`` on) for the envs' current
        episodes."""
        agent, n_envs = self.agent, self.env.num_envs
        self.processor = NStepProcessor(n_envs, agent.n_step, agent.gamma)
        self.stream: RecurrentStream | None = None
        if isinstance(agent, RecurrentActing):  # the buffer's frame_stack is null (refused)
            self.stream = RecurrentStream(
                agent, n_envs, agent.gamma, agent.n_step, stream=self.seed * n_envs
            )
        self.frames: FrameEncoder | None = None
        self.stack_processor: NStepProcessor | None = None
        self.scorer: ActedValueScorer | None = None
        if self.frame_stack:
            self.frames = FrameEncoder(self.seed, n_envs, agent.n_step, self.env.obs, first_frame)
            if self.priorities and isinstance(agent, ValueActing):
                self.scorer = ActedValueScorer(agent, self.frames)
            elif self.priorities:  # the agent scores full stacks: keep them alongside frame ids
                self.stack_processor = NStepProcessor(n_envs, agent.n_step, agent.gamma)

    def _step(self, stats: SampleStats) -> None:
        """One batched policy call and one step of every env, added to the n-step windows."""
        obs = self.env.obs
        if self._move_schedule is not None:  # the schedule stands where the run does
            assert self.clock is not None
            self._move_schedule(self.clock.position())
        if self.stream is not None:
            action = self.stream.act(obs)
        elif self.scorer is not None:
            action = self.scorer.act(obs)
        else:
            action = self.agent.act(obs, explore=True)
        if not self.acted:
            check_actions(self.agent, obs, action, self.env.action_space)
            self.acted = True
        step = self.env.step(action)
        stats.env_steps += self.env.num_envs
        if self.clock is not None:
            self.clock.advance(self.env.num_envs)
        stats.episode_returns += step.episode_returns
        stats.episode_lengths += step.episode_lengths
        if self.stream is not None:
            self.stream.add(obs, action, step)
            return
        if self.frames is None:
            self.processor.add(obs, action, step)
            return
        obs_ids = self.frames.ids
        done = step.terminated | step.truncated
        next_ids = self.frames.observe(obs, step.next_obs, done, step.obs)
        if self.scorer is not None and done.any():
            self.scorer.episodes_ended(np.flatnonzero(done), next_ids, step)
        self.processor.add(obs_ids, action, replace(step, next_obs=next_ids))
        if self.stack_processor is not None:
            self.stack_processor.add(obs, action, step)

    def _take(self) -> tuple[Transitions | None, Transitions | None]:
        """The transitions the steps since the last take finished: (to send, the same with full
        observations for the agent to score, when it must)."""
        out = self.processor.take()
        if self.frames is None:
            return out, out
        scored = None if self.stack_processor is None else self.stack_processor.take()
        if out is not None:  # frames travel with (or before) the first transitions using them
            out.frames = self.frames.take(self.env.obs)
        return out, scored

    def _score(self, batch: Batch | None, scored: Batch | None) -> Batch | None:
        if isinstance(batch, Transitions) and self.scorer is not None:
            self.scorer.score(batch, self.env.obs)
        elif batch is not None and scored is not None and self.priorities:
            if not isinstance(self.agent, TDErrorScoring):  # refused earlier, by the buffer
                raise TypeError(f"{type(self.agent).__name__} cannot score transitions (td_error)")
            batch.priority = np.asarray(self.agent.td_error(scored), dtype=np.float32)  # type: ignore[arg-type]
        return batch

    def step(self, stats: SampleStats) -> Batch | None:
        """One batched policy call and one step of every env; returns finished transitions
        (sequences)."""
        self._step(stats)
        if self.stream is not None:
            sequences = self.stream.take()
            return self._score(sequences, sequences)
        return self._score(*self._take())

    def sample(
        self,
        min_transitions: int,
        stats: SampleStats,
        on_step: Callable[[], object] | None = None,
    ) -> Batch:
        """Step until at least ``min_transitions`` transitions are ready; return them in one batch
        (with priorities, scored in one call). Steps go by blocks of as many as the missing
        transitions need (one per env and step), turned into transitions once per block; a
        recurrent agent's sequences are taken after every step, until ``min_transitions``
        sequences are ready. ``on_step`` is called after every env step (an actor's heartbeat).
        """
        if self.stream is not None:
            return self._sample_sequences(min_transitions, stats, on_step)
        parts: list[Transitions] = []
        scored: list[Transitions] = []
        ready = 0
        while ready < min_transitions:
            for _ in range(-(-(min_transitions - ready) // self.env.num_envs)):
                self._step(stats)
                if on_step is not None:
                    on_step()
            out, full = self._take()
            if out is not None:
                parts.append(out)
                if full is not None and self.frames is not None:
                    scored.append(full)
                ready += len(out)
        batch = Transitions.concat(parts)
        if self.priorities:
            by_stacks = self.stack_processor is not None
            self._score(batch, Transitions.concat(scored) if by_stacks else batch)
        return batch

    def _sample_sequences(
        self, min_sequences: int, stats: SampleStats, on_step: Callable[[], object] | None
    ) -> Sequences:
        """Step until at least ``min_sequences`` sequences are ready; return them in one batch
        (with priorities, scored in one call)."""
        assert self.stream is not None
        parts: list[Sequences] = []
        ready = 0
        while ready < min_sequences:
            self._step(stats)
            if on_step is not None:
                on_step()
            if (out := self.stream.take()) is not None:
                parts.append(out)
                ready += len(out)
        batch = Sequences.concat(parts)
        self._score(batch, batch)
        return batch

    def state(self) -> dict[str, Any]:
        """Env and n-step state as plain data (for checkpoints)."""
        state = {"env": self.env.state(), "pending": self.processor.state()}
        if self.stream is not None:
            state["sequences"] = self.stream.state()
        if self.frames is not None:
            state["frames"] = self.frames.state()
        if self.stack_processor is not None:
            state["pending_stacks"] = self.stack_processor.state()
        if self.scorer is not None:
            state["values"] = self.scorer.state()
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Put envs and pending n-step windows (a recurrent agent's memory and sequence windows)
        back as :meth:`state` saw them; envs that cannot be restored (``env.backend`` other than
        gymnasium, then or now) start fresh episodes and the pending windows are dropped (frame
        ids go on after the saved ones; a recurrent agent's memory starts from zeros)."""
        if not (isinstance(self.env, VectorEnv) and "episodes" in state["env"]):
            saved = state["env"].get("backend", "gymnasium")
            log.warning(
                "env.backend=%s (saved: %s): the envs cannot be restored from the checkpoint;"
                " the resumed run starts fresh episodes (their unfinished n-step windows dropped)",
                self.env.backend,
                saved,
            )
            self._start_windows(first_frame=state["frames"]["next_id"] if self.frames else 0)
            return
        self.env.restore(state["env"])
        if self.stream is not None:
            self.stream.restore(state["sequences"])
            return
        dtype, action_dtype = self.env.obs.dtype, np.dtype(self.env.action_space.dtype)
        if self.frames is None:
            self.processor.load_state(state["pending"], dtype, action_dtype)
            return
        self.processor.load_state(state["pending"], np.dtype(np.int64), action_dtype)
        self.frames.load_state(state["frames"], dtype)
        if self.stack_processor is not None:
            self.stack_processor.load_state(state["pending_stacks"], dtype, action_dtype)
        if self.scorer is not None:
            self.scorer.load_state(state["values"])

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
