"""``load_policy``: a trained policy from a run or checkpoint dir, without Hydra or the trainer.

The policy is built the way ``border eval`` builds it: the checkpoint's saved config names the
agent and the env, their components are imported only when trusted (a run dir is data, see
:mod:`border_py.runs.trust`), the env factory gives the spaces, the agent is built for them and
its policy weights (``policy.pt``) are loaded. Nothing of the training state is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.agents.base import Agent, ExplorationPosition, RecurrentActing
from border_py.agents.factory import build_agent
from border_py.agents.footprint import check_agent_weights
from border_py.agents.networks import resolve_device
from border_py.agents.r2d2 import R2D2
from border_py.deploy.numpy_policy import RecurrentState, as_batch, episode_state
from border_py.envs.factory import GymEnvFactory, build_env_factory
from border_py.errors import ConfigError, first_line
from border_py.layout import CONFIG
from border_py.runs.checkpoint import Checkpoint, pick_checkpoint
from border_py.runs.settings import RunSettings
from border_py.runs.trust import Trust, check_trust_list
from border_py.secrets import refuse_redacted
from border_py.seeding import derive_seed

__all__ = ["Policy", "build_policy_agent", "load_policy", "takes_rewards"]


def build_policy_agent(
    checkpoint: Checkpoint, config: dict[str, Any], device: str = "cpu", enforce: bool = True
) -> tuple[GymEnvFactory, tuple[gym.Space, gym.Space], Agent]:
    """The env factory, its (observation, action) spaces and the agent of ``config`` (the
    checkpoint's, or it with the caller's env overrides), the agent holding the checkpoint's
    policy weights. The caller has checked ``config`` against its trust. The agent's networks are
    bounded before they are built (:func:`~border_py.agents.footprint.check_agent_weights`);
    ``enforce`` is the caller's own ``check_resources``, never the saved config's.

    Raises:
        ConfigError: one line: a secret the run was given (saved redacted) and not given again,
            a bad env or agent config, an agent larger than the memory available (with
            ``enforce``), or weights that do not fit the agent built.
    """
    refuse_redacted({"env": config["env"]})  # a secret the run was given must be given again
    env_factory = build_env_factory(config)
    spaces = env_factory.spaces()
    check_agent_weights(config["agent"], spaces, enforce)
    agent = build_agent(config, spaces, device, derive_seed(RunSettings.seed_of(config), "agent"))
    try:
        agent.load_policy_state(checkpoint.policy)
    except (RuntimeError, KeyError) as exc:
        raise ConfigError(
            f"{checkpoint.path}: the policy does not fit the env ({first_line(exc)})"
        ) from None
    return env_factory, spaces, agent


@dataclass
class Policy:
    """A trained policy, ready to act: :meth:`predict` on observations of :meth:`make_env`'s env.

    Attributes:
        agent: the agent built from the checkpoint's config, holding its policy weights.
        env_factory: the run's env factory (its id, kwargs and wrappers).
        checkpoint: the checkpoint dir the weights come from.
        config: the checkpoint's saved config (plain data).
        env_id: the gymnasium id of the run's env.
        agent_name: the agent's class name (``DQN``, ``IQN``, ``SAC``, or a user's).
        opt_steps: the optimization steps the policy was trained for (None if not recorded).
        env_steps: the env steps the run had taken (None if not recorded).
        observation_space: the observations the policy takes (after the run's wrappers).
        action_space: the actions it gives.
    """

    agent: Agent
    env_factory: GymEnvFactory
    checkpoint: Path
    config: dict[str, Any]
    env_id: str
    agent_name: str
    opt_steps: int | None
    env_steps: int | None
    observation_space: gym.Space
    action_space: gym.Space

    def make_env(self, **kwargs: Any) -> gym.Env:
        """A fresh env as the run evaluated in: ``gymnasium.make`` of its id with its kwargs,
        then its wrappers (those of evaluation envs); ``kwargs`` are added to the id's kwargs
        (e.g. ``render_mode="human"``). Its observations go to :meth:`predict` as they are."""
        if not kwargs:
            return self.env_factory.make()
        factory = build_env_factory(
            {"env": self.config["env"] | {"kwargs": self.env_factory.kwargs | kwargs}}
        )
        return factory.make()

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Any]:
        """Actions for observations, with Stable-Baselines3's signature and return:
        ``(action, state)``.

        A feed-forward policy returns ``state`` as given (SB3's policies: None). A recurrent one
        (R2D2) acts as sb3-contrib's ``RecurrentPPO``: from ``state``, what the previous call
        returned (None: zeros), zeroed where ``episode_start`` is True (no previous action), and
        returns its next state, a
        :class:`~border_py.deploy.numpy_policy.RecurrentState`: the core's ``h`` (and an LSTM's
        ``c``) ``(1, n_envs, hidden)``, the action just given (the core's next previous action)
        and the reward that follows it (NaN, for the caller to set, for a policy that takes it;
        SB3's ``evaluate_policy`` cannot).

        Args:
            observation: one observation (shaped as :attr:`observation_space`) or a batch of
                them (one more, leading dimension), as the env gives them: of the space's dtype,
                or one of its kind that holds the same values (a uint8 frame goes in unscaled).
            state: a recurrent policy's state from the previous call (None: every env at an
                episode's start); passed through by a feed-forward policy.
            episode_start: one flag per env (None: all False): True where an episode begins.
            deterministic: the greedy action (DQN, R2D2: the arg max of Q; IQN: of the mean
                over the agent's ``k`` midpoint quantile levels; SAC: the squashed mean mapped
                onto the action bounds); False (SB3's default): the agent's exploring action
                (``act(explore=True)``, continuing its schedule from the run's env steps).

        Returns:
            One action for one observation, a batch for a batch; the state (see above).

        Raises:
            ValueError: observations of another shape, or of a dtype that would change them
                (floats into a uint8 space: scaled frames would be scaled twice), or a state or
                ``episode_start`` that is not for these envs (one line naming what is expected).
        """
        shape = tuple(self.observation_space.shape or ())
        batch, single = as_batch(observation, shape, np.dtype(self.observation_space.dtype))
        if not isinstance(self.agent, RecurrentActing):
            actions = self.agent.act(batch, explore=not deterministic)
            return (actions[0] if single else actions), state
        agent: Any = self.agent
        _, parts, hidden = agent.initial_state(1).shape
        lstm, takes_reward = parts == 2, takes_rewards(agent)
        now = episode_state(state, episode_start, len(batch), hidden, lstm, takes_reward)
        core = np.stack([now.h[0]] + ([] if now.c is None else [now.c[0]]), axis=1)
        actions, after = agent.act_recurrent(
            batch, core, now.prev_action, now.prev_reward, not deterministic
        )
        reward = np.full(len(batch), np.nan if takes_reward else 0.0, np.float32)
        h, c = after[None, :, 0], (after[None, :, 1] if lstm else None)
        next_state = RecurrentState(h, c, np.asarray(actions, np.int64), reward)
        return (actions[0] if single else actions), next_state


def takes_rewards(agent: Any) -> bool:
    """Whether a recurrent agent's core takes the previous reward: R2D2's ``prev_reward``; a
    recurrent agent of a user's is assumed to (a reward it needs is never left out)."""
    return not isinstance(agent, R2D2) or bool(agent.args.prev_reward)


def trust_of(trust: Any) -> Trust:
    """The :class:`Trust` of a loading call given ``trust`` (names, one name or None)."""
    return Trust(entries=check_trust_list([] if trust is None else trust))


def load_policy(
    path: str | Path, trust: Any = None, device: str = "cpu", check_resources: bool = True
) -> Policy:
    """The trained policy of a run dir (its ``best`` checkpoint, else its newest: as
    ``border eval`` picks) or of a checkpoint dir.

    Args:
        path: a run dir or a checkpoint dir.
        trust: packages, modules or classes of your own that the run's config may import
            (``["my_pkg"]``; see :mod:`border_py.runs.trust`): a run dir is data.
        device: where the policy's networks live (``cpu``, ``cuda``, ``cuda:<index>``).
        check_resources: False: networks larger than the memory available (or beyond border's
            ranges) are a warning, not an error (a saved config's ``check_resources`` is not
            used).

    Raises:
        ConfigError: one line: not a run or checkpoint dir, an untrusted import in its config,
            networks larger than the memory available, weights that do not fit, a bad device,
            a recurrent agent whose state is neither an LSTM's nor a GRU's.
    """
    resolve_device(device)  # a device this machine lacks is one line, before anything loads
    checkpoint = pick_checkpoint(str(path))
    trust_of(trust).check_imports(checkpoint.config, checkpoint.path / CONFIG)
    env_factory, (obs_space, act_space), agent = build_policy_agent(
        checkpoint, checkpoint.config, device, check_resources
    )
    if isinstance(agent, RecurrentActing) and agent.initial_state(1).shape[1] not in (1, 2):
        raise ConfigError(
            f"{checkpoint.path}: the recurrent agent {type(agent).__name__} keeps a state of"
            f" {agent.initial_state(1).shape[1]} parts; predict takes an LSTM's (h, c) or a"
            " GRU's h"
        )
    env_steps = checkpoint.meta.get("env_steps")
    env_steps = env_steps if isinstance(env_steps, int) else None
    if env_steps is not None and isinstance(agent, ExplorationPosition):
        # predict(deterministic=False) explores where the run's schedule was
        agent.set_exploration_step(env_steps)
    opt_steps = checkpoint.meta.get("opt_steps")
    return Policy(
        agent=agent,
        env_factory=env_factory,
        checkpoint=checkpoint.path,
        config=checkpoint.config,
        env_id=env_factory.id,
        agent_name=type(agent).__name__,
        opt_steps=opt_steps if isinstance(opt_steps, int) else None,
        env_steps=env_steps,
        observation_space=obs_space,
        action_space=act_space,
    )
