"""Test envs with stacked uint8 frames whose content says where they come from.

``FramePattern-v0`` emits 6x6 uint8 frames; a frame is a pure function of (tag, episode, step),
two random numbers drawn at each reset and the step in the episode, so any stack a buffer rebuilds can be checked against the stack gymnasium's
``FrameStackObservation(4)`` would have produced. Episodes end at a random step (terminated) or at
the time limit (truncated): both kinds of boundary occur within a few dozen steps.
``PongStack-v0`` is Atari Pong from pixels as in C3 (``AtariPreprocessing`` then
``FrameStackObservation(4)``), with a short time limit so that episodes end.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FrameStackObservation

SIDE = 6
STACK = 4


def pattern(tag: int, episode: int, step: int) -> np.ndarray:
    """The frame of ``step`` in ``episode`` (mod 256) of the stream ``tag``."""
    episode %= 256
    frame = (np.arange(SIDE * SIDE, dtype=np.int64) * 31 + step * 7 + episode * 13 + tag) % 251
    frame[:5] = [tag >> 8, tag & 255, episode % 256, step >> 8, step & 255]
    return frame.astype(np.uint8).reshape(SIDE, SIDE)


def decode(frame: np.ndarray) -> tuple[int, int, int]:
    """(tag, episode mod 256, step) of a frame made by :func:`pattern`."""
    flat = frame.reshape(-1).astype(np.int64)
    return int(flat[0] << 8 | flat[1]), int(flat[2]), int(flat[3] << 8 | flat[4])


class FramePattern(gym.Env):
    """Frames from :func:`pattern`; reward = action; terminates at a random step in [2, 12]."""

    observation_space = gym.spaces.Box(0, 255, (SIDE, SIDE), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.tag = self.episode = self.t = self.length = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        # everything comes from np_random, so that a checkpoint can replay the episode
        self.tag = int(self.np_random.integers(1, 65536))
        self.episode = int(self.np_random.integers(0, 256))
        self.t = 0
        self.length = int(self.np_random.integers(2, 13))
        return pattern(self.tag, self.episode, 0), {}

    def step(self, action):
        self.t += 1
        terminated = self.t >= self.length
        return pattern(self.tag, self.episode, self.t), float(action), terminated, False, {}


def make_pattern(padding: str = "reset") -> gym.Env:
    """:class:`FramePattern` with a time limit of 9 steps, stacked by FrameStackObservation."""
    env = gym.wrappers.TimeLimit(FramePattern(), max_episode_steps=9)
    return FrameStackObservation(env, STACK, padding_type=padding)


def make_pong(max_episode_steps: int = 60) -> gym.Env:
    """ALE Pong as C3 specifies, cut to ``max_episode_steps`` agent steps."""
    import ale_py

    gym.register_envs(ale_py)
    env = gym.make("ALE/Pong-v5", frameskip=1, max_episode_steps=max_episode_steps * 4)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84)
    return FrameStackObservation(env, STACK)


gym.register("FramePattern-v0", entry_point=make_pattern)
gym.register("PongStack-v0", entry_point=make_pong)
