"""Atari 2600 games through the Arcade Learning Environment (``env=atari``; the ``[atari]`` extra).

Observations follow the standard DQN preprocessing, built from gymnasium's own wrappers:
``ALE/<Game>-v5`` with ``frameskip=1``, then ``AtariPreprocessing`` (random no-op starts, frame
skip with max-pooling of the last two frames, 84x84 grayscale, uint8) and
``FrameStackObservation`` (the last 4 frames, oldest first: shape (4, 84, 84); at an episode's
start the first frame fills the stack, gymnasium's default ``padding_type="reset"``).

Games that wait for FIRE to start (Breakout serves the ball only then) get FIRE pressed once after
every reset (:class:`FireOnReset`, key ``fire_reset``), in training and evaluation envs alike.

Training and evaluation envs differ on purpose: the actors' envs (``make(training=True)``) may
clip rewards to their sign and end an episode at each life lost; the evaluation envs
(``make()``, also used by ``border eval``) never do, so ``eval/`` returns are game scores.
The factory's default evaluation epsilon (:attr:`AtariEnvFactory.eval_epsilon`) is 0.001, the
protocol of Dopamine's agents: a fully greedy policy can stall a game until the step cap.

Checkpointed envs (the serial trainer) are restored by replaying the episode's actions (see
:class:`~border_py.envs.vector.EpisodeLog`). That is exact with ``repeat_action_probability=0``. With
sticky actions (> 0) ALE draws the repeats from its own generator, which a checkpoint does not
capture: an episode that began with a seeded reset replays exactly, one that began by an
automatic reset is rebuilt with the same actions but possibly different frames (the episode's
return and length so far carry over, training continues from a valid state).
"""

from __future__ import annotations

import importlib
import re
from typing import Any, SupportsFloat, cast

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import (
    AtariPreprocessing,
    FrameStackObservation,
    TimeLimit,
    TransformReward,
)

from border_py.config import flag, fraction, non_negative, positive, require
from border_py.envs.backends import ATARI_ONLY
from border_py.envs.batched import BatchedAtari
from border_py.envs.factory import GymEnvFactory
from border_py.envs.pools import AleVectorPool, AtariPool, EnvpoolPool
from border_py.envs.vector import BatchedEnv
from border_py.errors import ConfigError

__all__ = ["AtariEnvFactory", "FireOnReset"]

FRAME_CAP = 108_000  # ALE v5's frames per episode


def register_ale() -> None:
    """Import ale-py, which registers the ``ALE/`` ids (and ships the ROMs), in this process.

    Actors and the evaluator are fresh processes (forkserver or spawn): each factory calls this.
    """
    try:
        ale_py = importlib.import_module("ale_py")
        importlib.import_module("cv2")  # AtariPreprocessing resizes with OpenCV
    except ImportError as exc:
        raise ConfigError(
            f"env: Atari needs the atari extra ({exc}); pip install 'border-py[atari]'"
        ) from None
    gym.register_envs(ale_py)


class FireOnReset(gym.Wrapper):
    """Presses FIRE once after every reset (the step's reward is not counted), for games that wait
    for it to start; an episode that the FIRE step ended is reset again.

    Args:
        env: the preprocessed env (FIRE is one agent step, frame skip included).
        fire: the index of FIRE in the env's action set.
    """

    MAX_RESETS = 10

    def __init__(self, env: gym.Env, fire: int) -> None:
        super().__init__(env)
        self.fire = fire

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset, then step FIRE; the observation after FIRE, the reset's info updated by the step's."""
        for _ in range(self.MAX_RESETS):
            _, reset_info = self.env.reset(seed=seed, options=options)
            obs, _, terminated, truncated, info = self.env.step(self.fire)
            if not (terminated or truncated):
                return obs, reset_info | info
            seed = None  # the next reset continues the env's random stream
        raise RuntimeError(f"FIRE ended the episode right after each of {self.MAX_RESETS} resets")


def _sign(reward: SupportsFloat) -> float:
    return float(np.sign(float(reward)))


class AtariEnvFactory(GymEnvFactory):
    """Builds preprocessed Atari envs (see the module docstring).

    Args:
        id: an ALE id, e.g. ``ALE/Pong-v5``.
        repeat_action_probability: sticky actions (ALE v5's default 0.25, Machado et al. 2018;
            DQN, Ape-X and IQN used 0 with no-op starts).
        full_action_space: all 18 actions instead of the game's minimal set.
        noop_max: at most this many no-ops at reset (random number, at least 1; 0: none).
        frame_skip: emulator frames per agent step (max-pooled over the last two).
        screen_size: side of the square grayscale frame.
        frame_stack: frames stacked into one observation.
        terminal_on_life_loss: training envs end an episode when a life is lost (gymnasium's
            option: the game restarts, unlike DeepMind's EpisodicLifeEnv which continues it).
        clip_rewards: training envs give ``sign(reward)``.
        max_episode_steps: agent steps before truncation (None: ALE's cap of 108,000 frames).
        fire_reset: press FIRE after each reset (:class:`FireOnReset`): ``auto`` (when the game's
            action set has FIRE, as Pong's and Breakout's do), ``true`` (the game must have FIRE)
            or ``false``.
        kwargs: extra keyword arguments for ``gymnasium.make`` (e.g. ``mode``, ``difficulty``).
        wrappers: the user's gymnasium wrappers, applied after the preprocessing and the frame
            stack (see :class:`~border_py.envs.factory.GymEnvFactory`).
        backend: what steps the actors' envs: ``gymnasium``, ``gymnasium_async``, ``vector``,
            ``envpool`` or ``ale_vector`` (C++ vector envs, :mod:`border_py.envs.batched`: no
            ``terminal_on_life_loss``, no training wrappers; envpool needs ``noop_max`` >= 1, ale-py's
            no ``kwargs``).
        num_threads: the C++ backends' threads per actor (the others ignore it). 1 suits the
            usual sizing of one actor per core: more threads than cores make the pools' workers
            wait on each other.
        vector: with ``backend=vector``: ``_target_``, a function of yours that builds the
            VectorEnv (``gymnasium.make_vec`` would skip this preprocessing: refused); see
            :class:`~border_py.envs.factory.GymEnvFactory`.

    Attributes:
        eval_epsilon: the default probability of a random action in evaluation episodes: 0.001,
            as in Dopamine's Atari agents.
        final_eval_episodes: the default episodes of a run's final evaluations: 10 (an Atari
            episode runs thousands of steps, up to 27,000 with the usual time limit).
    """

    eval_epsilon = 0.001
    final_eval_episodes = 10
    atari = True

    def __init__(
        self,
        id: str,
        repeat_action_probability: float = 0.25,
        full_action_space: bool = False,
        noop_max: int = 30,
        frame_skip: int = 4,
        screen_size: int = 84,
        frame_stack: int = 4,
        terminal_on_life_loss: bool = False,
        clip_rewards: bool = True,
        max_episode_steps: int | None = None,
        fire_reset: str | bool = "auto",
        kwargs: dict[str, Any] | None = None,
        wrappers: list[dict[str, Any]] | None = None,
        backend: str = "gymnasium",
        num_threads: int = 1,
        vector: dict[str, Any] | None = None,
    ) -> None:
        register_ale()
        positive("num_threads", num_threads, int)
        self.num_threads = num_threads
        fraction("repeat_action_probability", repeat_action_probability)
        non_negative("noop_max", noop_max)
        positive("frame_skip", frame_skip, int)
        positive("screen_size", screen_size, int)
        positive("frame_stack", frame_stack, int)
        flag("full_action_space", full_action_space)
        flag("terminal_on_life_loss", terminal_on_life_loss)
        flag("clip_rewards", clip_rewards)
        fire_ok = fire_reset == "auto" or isinstance(fire_reset, bool)
        require("fire_reset", fire_ok, "auto, true or false", fire_reset)
        require(
            "id", isinstance(id, str) and id.startswith("ALE/"), "an ALE id like 'ALE/Pong-v5'", id
        )
        extra = dict(kwargs or {})
        for key in ("frameskip", "repeat_action_probability", "full_action_space"):
            require(f"kwargs.{key}", key not in extra, "set by its own key, not in kwargs", key)
        super().__init__(id, extra, wrappers=wrappers, backend=backend, vector=vector)
        self.max_episode_steps = max_episode_steps  # applied in agent steps, after frame skip
        if max_episode_steps is not None:
            positive("max_episode_steps", max_episode_steps, int)
        self.make_kwargs = extra | {
            "frameskip": 1,  # AtariPreprocessing skips frames (and max-pools)
            "repeat_action_probability": repeat_action_probability,
            "full_action_space": full_action_space,
        }
        self.noop_max, self.frame_skip, self.screen_size = noop_max, frame_skip, screen_size
        self.frame_stack = frame_stack
        self.terminal_on_life_loss, self.clip_rewards = terminal_on_life_loss, clip_rewards
        self.fire_reset = fire_reset
        if backend in ATARI_ONLY:
            self._check_batched()

    def make_base(self, render_mode: str | None = None, training: bool = False) -> gym.Env:
        """One preprocessed env before ``env.wrappers``; ``training`` applies reward clipping and
        life-loss episodes."""
        register_ale()
        env = gym.make(self.id, render_mode=render_mode, **self.make_kwargs)
        env = AtariPreprocessing(
            env,
            noop_max=self.noop_max,
            frame_skip=self.frame_skip,
            screen_size=self.screen_size,
            terminal_on_life_loss=training and self.terminal_on_life_loss,
            grayscale_obs=True,
            scale_obs=False,
        )
        meanings: list[str] = cast(Any, env.unwrapped).get_action_meanings()
        if self.fire_reset is True and "FIRE" not in meanings:
            raise ConfigError(
                f"fire_reset=true: {self.id} has no FIRE action ({', '.join(meanings)}); use auto"
            )
        if self.fire_reset in ("auto", True) and "FIRE" in meanings:
            env = FireOnReset(env, meanings.index("FIRE"))
        if self.max_episode_steps is not None:
            env = TimeLimit(env, self.max_episode_steps)
        if training and self.clip_rewards:
            env = TransformReward(env, _sign)
        return FrameStackObservation(env, self.frame_stack)

    def _check_batched(self) -> None:
        """What the C++ vector envs cannot do, refused in one line."""
        name = f"backend={self.backend}"
        if self.terminal_on_life_loss:
            raise ConfigError(f"{name}: terminal_on_life_loss=true needs backend=gymnasium")
        if any(w.applies(training=True) for w in self.wrappers):
            raise ConfigError(f"{name}: the actors' envs take no wrappers (use backend=gymnasium)")
        if self.backend == "envpool" and self.noop_max == 0:
            raise ConfigError(f"{name}: needs noop_max >= 1 (envpool has no 0)")
        if self.backend == "ale_vector" and self.kwargs:
            raise ConfigError(f"{name}: takes no kwargs ({', '.join(sorted(self.kwargs))})")

    def action_meanings(self) -> list[str]:
        """The names of the env's actions, in order (one env built and closed)."""
        env = gym.make(self.id, **self.make_kwargs)
        try:
            return list(cast(Any, env.unwrapped).get_action_meanings())
        finally:
            env.close()

    def make_vector(self, n_envs: int, seed: int, replayable: bool = False) -> BatchedEnv:
        """The actors' envs; with ``backend`` ``envpool`` or ``ale_vector`` a
        :class:`~border_py.envs.batched.BatchedAtari` (never replayable: a resume starts fresh
        episodes)."""
        if self.backend not in ATARI_ONLY:
            return super().make_vector(n_envs, seed, replayable)
        register_ale()
        meanings = self.action_meanings()
        if self.fire_reset is True and "FIRE" not in meanings:
            raise ConfigError(
                f"fire_reset=true: {self.id} has no FIRE action ({', '.join(meanings)}); use auto"
            )
        fire = meanings.index("FIRE") if self.fire_reset and "FIRE" in meanings else None
        pool = self._pool(n_envs, seed, fire is not None)
        return BatchedAtari(
            pool,
            self.backend,
            gym.spaces.Box(
                0, 255, (self.frame_stack, self.screen_size, self.screen_size), np.uint8
            ),
            len(meanings),
            self.frame_stack,
            seed,
            None if pool.fires else fire,
            self.clip_rewards,
            self.max_episode_steps,
        )

    def _pool(self, n_envs: int, seed: int, fire: bool) -> AtariPool:
        """The backend's C++ vector env, with this factory's preprocessing."""
        game = self.id.removeprefix("ALE/").split("-")[0]
        if self.max_episode_steps is None:  # ALE's frame cap
            cap = FRAME_CAP // self.frame_skip
        else:  # the adapter's time limit comes first: the pool's cap is beyond it
            cap = self.max_episode_steps + 2
        common = {
            "noop_max": self.noop_max,
            "stack_num": 1,  # BatchedAtari stacks the frames
            "img_height": self.screen_size,
            "img_width": self.screen_size,
            "repeat_action_probability": self.make_kwargs["repeat_action_probability"],
            "full_action_space": self.make_kwargs["full_action_space"],
            "num_threads": self.num_threads,
        }
        if self.backend == "envpool":
            options = (
                common | self.kwargs | {"frame_skip": self.frame_skip, "max_episode_steps": cap}
            )
            return EnvpoolPool(game, n_envs, seed, options)
        snake = re.sub(r"(?<!^)(?=[A-Z])", "_", game).lower()  # MsPacman -> ms_pacman
        options = common | {
            "frameskip": self.frame_skip,
            "use_fire_reset": fire,
            "max_num_frames_per_episode": cap * self.frame_skip + self.noop_max,
        }
        return AleVectorPool(snake, n_envs, seed, options)
