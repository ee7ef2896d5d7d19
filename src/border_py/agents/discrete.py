"""What the value-based agents over discrete actions (DQN, IQN, R2D2) set up before their own
network.

:class:`DiscreteValueAgent` checks the env's spaces against the class's, reads the
hyper-parameters into their dataclass, starts epsilon-greedy exploration, and keeps what the
actors and the learner read (``gamma``, ``n_step``, ``batch_size``, the device);
:meth:`~DiscreteValueAgent.value_network` builds the one online network under torch's RNG seeded
with the agent's seed, with its target copy and its Adam optimizer; :func:`value_parts` is what
such an agent checkpoints. The agent's own loss, update
and acting stay in its module (:mod:`border_py.agents.dqn`, :mod:`border_py.agents.iqn`,
:mod:`border_py.agents.r2d2`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

import gymnasium as gym
import torch
from torch import nn

from border_py.agents.base import Accepts
from border_py.agents.checkpointed import (
    Checkpointed,
    Count,
    OptimizerStates,
    Part,
    RandomState,
    Weights,
)
from border_py.agents.exploration import EpsilonGreedy
from border_py.agents.optim import Adam, Optimizers
from border_py.agents.spaces import check_spaces

__all__ = ["DiscreteValueAgent", "ValueArgs", "value_parts"]


class ValueArgs(Protocol):
    """The hyper-parameters every :class:`DiscreteValueAgent` has (``DQNArgs``, ``IQNArgs``)."""

    @property
    def gamma(self) -> float: ...
    @property
    def n_step(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def lr(self) -> float: ...
    @property
    def adam_eps(self) -> float: ...
    @property
    def max_grad_norm(self) -> float | None: ...
    @property
    def eps_start(self) -> float: ...
    @property
    def eps_final(self) -> float: ...
    @property
    def eps_decay_steps(self) -> int: ...


A = TypeVar("A", bound=ValueArgs)
M = TypeVar("M", bound=nn.Module)


class DiscreteValueAgent(EpsilonGreedy, Checkpointed, Generic[A]):
    """An off-policy agent over a Discrete action space that acts epsilon-greedily on the values
    of one online network, learns with one Adam optimizer and bootstraps from a target copy.

    A subclass's ``__init__`` calls this one first, then builds its network with
    :meth:`value_network`.

    Args:
        args_class: the agent's hyper-parameters dataclass (see :class:`ValueArgs`).
        observation_space: the env's (Box) observation space.
        action_space: the env's Discrete action space.
        device: where the learner's networks live (``cpu`` or ``cuda``).
        seed: seeds exploration here, and the network's initialization in
            :meth:`value_network`.
        hparams: the config's keys, the fields of ``args_class``.

    Raises:
        ConfigError: spaces the class does not accept (before the hyper-parameters are read), or
            a bad hyper-parameter.
    """

    accepts = Accepts(observation=(gym.spaces.Box,), action=(gym.spaces.Discrete,))
    reports_td_error = True  # update() returns td_error: usable with prioritized replay
    discrete_actions = True  # TensorUpdate: actions as int64 indices
    args: A

    def __init__(
        self,
        args_class: Callable[..., A],
        observation_space: gym.Space,
        action_space: gym.Space,
        device: str,
        seed: int,
        hparams: dict[str, Any],
    ) -> None:
        check_spaces(type(self), observation_space, action_space)
        args = self.args = args_class(**hparams)
        assert isinstance(action_space, gym.spaces.Discrete)  # check_spaces made sure
        n_actions = int(action_space.n)
        super().__init__(n_actions, seed, args.eps_start, args.eps_final, args.eps_decay_steps)
        self.gamma, self.n_step, self.batch_size = args.gamma, args.n_step, args.batch_size
        self.device = torch.device(device)
        self.opt_steps = 0

    def value_network(
        self, name: str, seed: int, build: Callable[[], M]
    ) -> tuple[M, M, Optimizers]:
        """The online network ``build()`` makes, on the device; its target copy (no gradients);
        and its optimizer (Adam with the agent's ``lr``, ``adam_eps`` and ``max_grad_norm``),
        saved under ``name``.

        ``build`` runs under torch's global RNG seeded with ``seed`` and then put back as it was
        (``fork_rng``): the weights are a function of the seed alone.
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            online = build()
        online = online.to(self.device)
        target = copy.deepcopy(online).requires_grad_(False)
        args = self.args
        adam = Adam(
            list(online.parameters()), args.lr, args.adam_eps, max_grad_norm=args.max_grad_norm
        )
        return online, target, Optimizers({name: adam})


def value_parts(network: str) -> dict[str, Part]:
    """The checkpointed parts (:attr:`~border_py.agents.checkpointed.Checkpointed.checkpointed`)
    of a :class:`DiscreteValueAgent` whose online network is ``agent.<network>``, built by
    :meth:`~DiscreteValueAgent.value_network` under ``network``: its weights, its target's
    (``<network>_target``), its optimizer, the step counters and the exploration generator.

    Their keys are the checkpoint format (DQN's and R2D2's ``q``, IQN's ``z``): an agent adds its
    own parts after them.
    """
    return {
        network: Weights(network),
        f"{network}_target": Weights(f"{network}_target"),
        "optimizer": OptimizerStates(only=network),
        "env_steps": Count("env_steps"),
        "opt_steps": Count("opt_steps"),
        "rng": RandomState("rng"),  # exploration
    }
