"""Evaluation of a policy on its own env instance: greedy, or epsilon-greedy with a small epsilon."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import RecordVideo

from border_py.agents.base import Agent, RecurrentActing
from border_py.agents.contract import check_actions
from border_py.config import fraction
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError
from border_py.evaluation.video import render_offscreen

__all__ = ["EvalResult", "EvaluationStopped", "Evaluator"]


class EvaluationStopped(Exception):
    """An evaluation ended unfinished: its ``stop()`` returned True (a stop signal came).

    Args:
        played: the episodes played to their end before it.
        episodes: the episodes it was to play.
    """

    def __init__(self, played: int, episodes: int) -> None:
        super().__init__(f"stopped after {played} of {episodes} episodes")
        self.played, self.episodes = played, episodes


@dataclass
class EvalResult:
    """Statistics of one evaluation."""

    return_mean: float
    return_std: float
    return_min: float
    return_max: float
    length_mean: float
    episode_returns: list[float]
    seeds: range = range(0)  # the episodes' reset seeds, in order (empty: not recorded)
    episode_lengths: list[int] = field(default_factory=list)  # steps of each episode, in order

    def scalars(self) -> dict[str, float]:
        """The result as ``eval/`` scalars."""
        return {
            "eval/return_mean": self.return_mean,
            "eval/return_std": self.return_std,
            "eval/return_min": self.return_min,
            "eval/return_max": self.return_max,
            "eval/length_mean": self.length_mean,
        }


class Evaluator:
    """Runs ``n_episodes`` episodes; episode ``i`` always starts from reset seed ``seed + i`` (or
    from the ``i``-th seed of the range that :meth:`evaluate` is given).

    Each step takes the agent's greedy action (``act(..., explore=False)``), or, with probability
    ``epsilon``, a uniformly random one (Discrete action spaces only; the evaluation epsilon of
    Atari protocols, e.g. Dopamine's 0.001, which keeps a greedy policy from stalling a game).
    The random draws of episode ``i`` come from a generator seeded with ``(seed, i)``. A recurrent
    agent (:class:`~border_py.agents.base.RecurrentActing`) acts with ``act_recurrent`` from its
    episode-start state (zeros, no previous action or reward) at every episode, its state moved on
    at every step (a random action's too: it is the previous action of the next). Fixed seeds
    make an evaluation a function of the weights (and the seed) alone, so successive evaluations
    (and a resumed run) are compared on the same episodes.

    Args:
        env_factory: builds the evaluation env.
        n_episodes: episodes per evaluation.
        seed: base reset seed (and seed of the epsilon draws).
        max_steps: step cap per episode (a greedy policy can loop forever).
        video_dir: record every episode as an mp4 there (gymnasium's RecordVideo; needs moviepy;
            SDL draws offscreen: :func:`~border_py.evaluation.video.render_offscreen`).
        epsilon: probability of a random action at each step (the env's default is the factory's
            ``eval_epsilon``).

    Raises:
        ConfigError: ``epsilon`` outside [0, 1], or > 0 for an env whose actions are not Discrete.
    """

    def __init__(
        self,
        env_factory: GymEnvFactory,
        n_episodes: int,
        seed: int,
        max_steps: int,
        video_dir: Path | None = None,
        epsilon: float = 0.0,
    ) -> None:
        fraction("epsilon", epsilon)
        if video_dir is None:
            self.env = env_factory.make()
        else:
            render_offscreen()
            self.env = RecordVideo(
                env_factory.make(render_mode="rgb_array"),
                str(video_dir),
                episode_trigger=lambda _: True,
                disable_logger=True,
            )
        self.random_actions: gym.spaces.Discrete | None = None  # None: greedy actions only
        actions = self.env.action_space
        if epsilon > 0:
            if not isinstance(actions, gym.spaces.Discrete):
                self.env.close()
                raise ConfigError(
                    f"epsilon={epsilon}: random evaluation actions need a Discrete action space,"
                    f" the env has {actions} (use 0)"
                )
            self.random_actions = actions
        self.n_episodes = n_episodes
        self.seed = seed
        self.max_steps = max_steps
        self.epsilon = epsilon
        self.acted = False  # the agent's first actions are checked (check_actions), no later ones

    def evaluate(
        self, agent: Agent, seeds: range | None = None, stop: Callable[[], bool] | None = None
    ) -> EvalResult:
        """Play the episodes with ``agent.act(..., explore=False)`` (and epsilon-random actions):
        one per reset seed of ``seeds`` (None: the evaluator's own ``n_episodes`` from ``seed``;
        the random draws of episode ``i`` seeded with ``(seeds.start, i)``).

        ``stop`` is asked before every step (a flag read: nothing beside an env step and a
        forward pass), so that a stop signal ends even a long episode of a slow env within a step.

        Raises:
            AgentContractError: the first actions ``act`` returned do not fit the action space
                (:func:`~border_py.agents.contract.check_actions`).
            EvaluationStopped: ``stop()`` returned True; the rest is not played.
        """
        if seeds is None:
            seeds = range(self.seed, self.seed + self.n_episodes)
        returns, lengths = [], []
        for i, seed in enumerate(seeds):
            obs, _ = self.env.reset(seed=seed)
            memory = _Memory(agent) if isinstance(agent, RecurrentActing) else None
            rng = np.random.default_rng((seeds.start, i))
            total, steps = 0.0, 0
            while steps < self.max_steps:
                if stop is not None and stop():
                    raise EvaluationStopped(i, len(seeds))
                greedy = None if memory is None else self._act(memory, np.asarray(obs)[None])
                if self.random_actions is not None and rng.random() < self.epsilon:
                    action = self.random_actions.start + rng.integers(self.random_actions.n)
                else:
                    action = self._act(agent, np.asarray(obs)[None]) if greedy is None else greedy
                obs, reward, terminated, truncated, _ = self.env.step(action)
                if memory is not None:
                    memory.moved(action, float(reward))
                total += float(reward)
                steps += 1
                if terminated or truncated:
                    break
            returns.append(total)
            lengths.append(steps)
        r = np.asarray(returns)
        return EvalResult(
            float(r.mean()),
            float(r.std()),
            float(r.min()),
            float(r.max()),
            float(np.mean(lengths)),
            returns,
            seeds,
            lengths,
        )

    def _act(self, agent: Agent | _Memory, obs: np.ndarray) -> Any:
        """The agent's greedy action for one observation (a batch of one); the first is checked."""
        actions = agent.act(obs, explore=False)
        if not self.acted:
            acting = agent.agent if isinstance(agent, _Memory) else agent
            check_actions(acting, obs, actions, self.env.action_space)
            self.acted = True
        return actions[0]

    def close(self) -> None:
        """Close the env."""
        self.env.close()


class _Memory:
    """A recurrent agent's state in one evaluation episode, from the episode-start one."""

    def __init__(self, agent: RecurrentActing) -> None:
        self.agent: Any = agent
        self.state = agent.initial_state(1)
        self.prev_action = np.full(1, -1, dtype=np.int64)
        self.prev_reward = np.zeros(1, dtype=np.float32)
        self.next_state = self.state

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """The greedy actions for ``obs`` (a batch of one) with the episode's state so far."""
        actions, self.next_state = self.agent.act_recurrent(
            obs, self.state, self.prev_action, self.prev_reward, explore
        )
        return actions

    def moved(self, action: Any, reward: float) -> None:
        """``action`` was taken (greedy or random) and ``reward`` followed."""
        self.state = self.next_state
        self.prev_action = np.asarray([action], dtype=np.int64)
        self.prev_reward = np.asarray([reward], dtype=np.float32)
