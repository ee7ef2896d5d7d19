"""A C++ Atari vector env (:mod:`border_py.envs.pools`) with the
:class:`~border_py.envs.vector.VectorEnv` contract and today's Atari path's conventions.

The pool hands over single frames; the stacks are made here as gymnasium's
``FrameStackObservation`` makes them (the last ``k`` frames, oldest first, an episode's first
stack padded with its first frame), so that they are the gymnasium path's stacks.

Same-step autoreset: an env whose episode ended is reset right after that step (the pool's own
next-step autoreset never runs), so ``next_obs`` is always the final observation and ``obs`` the
next episode's first. FIRE after a reset is pressed here as one agent step whose reward is not
counted, as :class:`~border_py.envs.atari.FireOnReset` does (for pools that do not press it
themselves); a ``max_episode_steps`` time limit counts agent steps without that FIRE step, as
gymnasium's ``TimeLimit`` around ``FireOnReset`` does; rewards are clipped to their sign for
training here, and the reported episode returns sum the rewards the actor trains on, as
:class:`~border_py.envs.vector.VectorEnv`'s do.

These envs cannot be checkpointed: :meth:`BatchedAtari.state` only names the backend, and a
resumed run starts fresh episodes.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from border_py.envs.pools import AtariPool
from border_py.envs.vector import EpisodeTally, VectorStep

__all__ = ["BatchedAtari"]

MAX_RESETS = 10  # as FireOnReset: resets whose FIRE step ended the episode, in a row


class BatchedAtari:
    """``pool``'s envs stepped together (see the module docstring).

    Args:
        pool: the C++ vector env.
        backend: its ``env.backend`` name.
        observation_space: one env's observation space.
        n_actions: the size of the action set.
        frame_stack: frames per observation.
        seed: seeds the action space's sampling.
        fire: the FIRE action to press after each reset (None: none, or the pool presses it).
        clip_rewards: train on ``sign(reward)``.
        max_episode_steps: agent steps before truncation (None: the pool's own frame cap).
    """

    def __init__(
        self,
        pool: AtariPool,
        backend: str,
        observation_space: gym.Space,
        n_actions: int,
        frame_stack: int,
        seed: int,
        fire: int | None,
        clip_rewards: bool,
        max_episode_steps: int | None,
    ) -> None:
        self.pool, self.backend = pool, backend
        self.num_envs = pool.num_envs
        self.observation_space = observation_space
        self.action_space: gym.Space = gym.spaces.Discrete(n_actions)
        self.action_space.seed(seed)
        self.fire, self.clip_rewards = fire, clip_rewards
        self.max_episode_steps = max_episode_steps
        self.tally = EpisodeTally(self.num_envs)
        self.frame_stack = frame_stack
        self.obs = self._start(np.arange(self.num_envs))
        self._closed = False

    def _start(self, ids: np.ndarray) -> np.ndarray:
        """Reset envs ``ids`` and press FIRE; the first stacks of their new episodes."""
        frames = self.pool.reset(ids)[:, -1]
        if self.fire is not None:
            todo = np.arange(len(ids))  # the positions in ids still to press FIRE in
            for _ in range(MAX_RESETS):
                actions = np.full(len(todo), self.fire, dtype=np.int64)
                fired, _, terminated, truncated = self.pool.step(actions, ids[todo])
                frames[todo] = fired[:, -1]
                todo = todo[terminated | truncated]  # FIRE ended the episode: reset again
                if not len(todo):
                    break
                self.pool.reset(ids[todo])
            else:
                raise RuntimeError(
                    f"FIRE ended the episode right after each of {MAX_RESETS} resets"
                )
        return np.repeat(frames[:, None], self.frame_stack, axis=1)

    def step(self, actions: np.ndarray) -> VectorStep:
        """Step every env once with ``actions`` (batched)."""
        frames, raw, terms, truncs = self.pool.step(np.asarray(actions, dtype=np.int64))
        next_obs = np.concatenate([self.obs[:, 1:], frames[:, -1:]], axis=1)
        reward = np.asarray(raw, dtype=np.float32)
        if self.clip_rewards:
            reward = np.sign(reward)
        terminated = np.asarray(terms, dtype=bool)
        truncated = np.asarray(truncs, dtype=bool)
        if self.max_episode_steps is not None:
            truncated |= self.tally.lengths + 1 >= self.max_episode_steps
        done = terminated | truncated
        returns, lengths = self.tally.add(reward, done)
        obs = next_obs
        if done.any():
            obs = next_obs.copy()
            ended = np.flatnonzero(done)
            obs[ended] = self._start(ended)
        self.obs = obs
        return VectorStep(next_obs, obs, reward, terminated, truncated, returns, lengths)

    def state(self) -> dict[str, Any]:
        """Only the backend's name: C++ vector envs are not checkpointed (a resume starts fresh
        episodes)."""
        return {"backend": self.backend}

    def close(self) -> None:
        """Release the envs (idempotent)."""
        if not self._closed:
            self._closed = True
            self.pool.close()
