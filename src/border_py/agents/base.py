"""The agent protocol: what a trainer and its actors need from a learning algorithm.

A user's own agent (``agent._target_=my_pkg.MyAgent``) implements :class:`Agent`. Its constructor
receives the keys of its YAML plus the runtime keyword arguments ``observation_space``,
``action_space``, ``device`` and ``seed``. border's own agents keep their hyper-parameters in a
dataclass (:mod:`border_py.agents.hparams`) and declare their checkpointed parts once
(:mod:`border_py.agents.checkpointed`), which gives them the protocol's ``policy_state``,
``state_dict`` and their loaders; a user's agent may derive from ``Checkpointed`` too, or write
those four methods itself.

The spaces an agent class takes are declared, not discovered: the class attribute
``accepts = Accepts(observation=(...), action=(...))`` (see :class:`Accepts`). ``build_agent``
checks the env's spaces against it before the agent is built
(:func:`border_py.agents.spaces.check_spaces`), so an env the agent cannot take fails in one line
that names the gymnasium wrapper which would fix it. A class without ``accepts`` is not checked.

Optional capabilities are protocols of their own, checked with ``isinstance`` before anything
starts (a setting that needs one the agent lacks fails in one line):

- :class:`FixedEpsilon` (``set_epsilon``): Ape-X actors act with fixed epsilons
  (``actor_manager.exploration=apex``): one for every env, or one per env row of ``act``'s batch.
- :class:`ExplorationPosition` (``set_exploration_step``): the schedule counts the run's env steps,
  all actors together: before each exploring ``act`` the sampler moves it to the run's position
  (:mod:`border_py.actors.clock`), the same for 1 actor, several and the serial trainer, and a
  resumed run's. An agent without it counts what its own copy acts (each actor on its own).
- :class:`TDErrorScoring` (``td_error``): actors compute initial priorities
  (``replay_buffer.priority_from_actors=true``): the per-sample TD-error magnitudes of a batch of
  fresh transitions under the policy weights alone (no gradient, no state change; bootstrap from
  the online network).
- :func:`reports_td_error` (the class attribute ``reports_td_error = True``): the agent drives
  prioritized replay (``replay_buffer=prioritized``). ``update(batch)`` then multiplies its
  per-sample losses by ``batch.weight`` (importance-sampling weights, when not None) exactly once,
  and when ``batch.index`` is set returns, among its metrics, ``"td_error"``: a float32 numpy array
  (B,) of non-negative per-sample TD-error magnitudes, which become the sampled rows' new
  priorities (the trainer removes it from the metrics).
- :class:`TensorUpdate` (``update_tensors``, ``device``, ``discrete_actions``): the learner's
  prefetch (``trainer.prefetch``) hands the update a batch a background thread already sampled
  and copied to ``device``. An agent with only ``update(Transitions)`` trains as before, without
  prefetch (the learner says so in one log line).
- :class:`RecurrentActing` (``initial_state``, ``act_recurrent``): the agent acts with a recurrent
  state per env (R2D2): its actor keeps each env's state, zeroes it at every episode start and
  hands it in with the previous action and reward; the agent learns on
  :class:`~border_py.sequences.Sequences`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.batch import TensorBatch
from border_py.transitions import Transitions

__all__ = [
    "Accepts",
    "ActingPrecision",
    "Agent",
    "ExplorationPosition",
    "FixedEpsilon",
    "RecurrentActing",
    "TDErrorScoring",
    "TensorUpdate",
    "ValueActing",
    "declared_spaces",
    "missing_members",
    "reports_td_error",
]


@runtime_checkable
class Agent(Protocol):
    """An off-policy agent.

    Attributes:
        gamma: discount factor; actors use it with ``n_step`` to build n-step transitions.
        n_step: steps summed per transition.
        batch_size: transitions per optimization step.
    """

    gamma: float
    n_step: int
    batch_size: int

    def act(self, obs: np.ndarray, explore: bool) -> np.ndarray:
        """Actions for a batch of observations; ``explore`` adds exploration and advances its schedule."""

    def update(self, batch: Transitions) -> dict[str, float]:
        """One optimization step on ``batch``; returns scalars (floats or 0-d tensors) named like ``train/loss``."""

    def exploration_stats(self) -> dict[str, float]:
        """Scalars describing the current exploration (e.g. ``train/epsilon``)."""

    def policy_state(self) -> dict[str, torch.Tensor]:
        """The weights an actor needs to act (CPU tensors), published by the learner."""

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load weights produced by :meth:`policy_state`."""

    def state_dict(self) -> dict[str, Any]:
        """The full training state (networks, targets, optimizers, counters), tensors and numbers only."""

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""


@runtime_checkable
class TensorUpdate(Protocol):
    """An agent whose update takes a batch already converted to tensors on its device.

    ``update(batch)`` must equal ``update_tensors(TensorBatch.of(batch, device,
    discrete_actions))`` with ``td_error`` made a numpy array: the learner's prefetch
    (``trainer.prefetch``) converts batches in a background thread and calls this instead. An
    agent that learns on sequences (:class:`RecurrentActing`) takes ``SequenceBatch.of(batch,
    device)`` instead (:mod:`border_py.agents.sequence_batch`).

    Attributes:
        device: where the batch's tensors must be.
        discrete_actions: actions become int64 indices (else float32).
    """

    device: torch.device
    discrete_actions: bool

    def update_tensors(self, batch: TensorBatch) -> dict[str, Any]:
        """``update``'s step on ``batch``; an agent that :func:`reports_td_error` returns
        ``"td_error"`` as a tensor (B,) on its device, left there (reading it back to the host
        waits for the device: the learner does so one step later)."""


@runtime_checkable
class FixedEpsilon(Protocol):
    """An epsilon-greedy agent whose epsilon can be fixed (Ape-X actors)."""

    def set_epsilon(self, epsilon: float | np.ndarray) -> None:
        """Act with ``epsilon`` from now on: one value for every row of ``act``'s batch, or an
        array with one value per row (row ``i`` is env ``i`` of the actor's vector env)."""


@runtime_checkable
class ActingPrecision(Protocol):
    """An agent whose actors can act in a lower precision (``actor_manager.policy_dtype``)."""

    def acting_dtypes(self) -> tuple[str, ...]:
        """The precisions its acting network can run in on CPU (``float32`` always among them)."""

    def set_acting_dtype(self, dtype: str) -> None:
        """Act (and hand out values) in ``dtype``, one of :meth:`acting_dtypes`, from now on."""


@runtime_checkable
class ExplorationPosition(Protocol):
    """An agent whose exploration schedule follows the run's env steps (all actors together)."""

    def set_exploration_step(self, env_steps: int) -> None:
        """Act from now on as the schedule says at the run's env step ``env_steps`` (called
        before each exploring ``act``; cheap: an assignment)."""


@runtime_checkable
class RecurrentActing(Protocol):
    """An agent that acts with a recurrent state per env (numpy in, numpy out) and learns on
    sequences (:mod:`border_py.sequences`) its actors cut with the settings below (its ``update``
    takes :class:`~border_py.sequences.Sequences`, from a sequence replay buffer).

    Attributes:
        burn_in: stored steps before each sequence's learning steps.
        length: learning steps per sequence.
        period: env steps between the starts of an episode's sequences.
    """

    burn_in: int
    length: int
    period: int

    def initial_state(self, n: int) -> np.ndarray:
        """The state of ``n`` envs at an episode's start: float32 zeros ``(n, k, hidden)`` (the
        actors zero an env's state at every episode start)."""

    def act_recurrent(
        self,
        obs: np.ndarray,
        state: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        explore: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(actions, next_state)`` for a batch of envs from ``obs``, each env's ``state``
        before this step, and the action (-1: none, at an episode's first step) and reward
        (0.0 there) that preceded it; ``explore`` adds exploration and advances its schedule."""


@runtime_checkable
class TDErrorScoring(Protocol):
    """An agent that scores fresh transitions with its policy weights (Ape-X initial priorities)."""

    def td_error(self, batch: Transitions) -> np.ndarray:
        """Per-sample TD-error magnitudes of ``batch``, float32 (B,), non-negative."""


@runtime_checkable
class ValueActing(Protocol):
    """An agent whose exploring policy acts on Q-values it can hand out: the sampler then scores
    fresh transitions from the values it acted on (:mod:`border_py.actors.values`) instead of
    evaluating every observation again (:class:`TDErrorScoring`'s way). Its TD error must be
    ``|R + d * max_a Q(s', a) - Q(s, a)|`` with its policy weights (DQN's actor copy: the online
    network bootstraps for itself, double or not)."""

    def act_with_values(self, obs: np.ndarray, explore: bool) -> tuple[np.ndarray, np.ndarray]:
        """``act(obs, explore)``'s actions and the values they came from, float32 (B, n_actions)."""

    def q_values(self, obs: np.ndarray) -> np.ndarray:
        """``Q(s, .)`` of the policy for a batch of observations, float32 (B, n_actions)."""


def reports_td_error(agent: Any) -> bool:
    """Whether the agent declares (class attribute ``reports_td_error = True``) that ``update``
    applies importance weights and returns ``td_error`` for prioritized samples."""
    return getattr(type(agent), "reports_td_error", False) is True


@dataclass(frozen=True)
class Accepts:
    """The spaces an agent class takes, declared as its class attribute ``accepts``.

    Example: ``accepts = Accepts(observation=(gym.spaces.Box,), action=(gym.spaces.Discrete,))``.

    Attributes:
        observation: the observation space types the agent takes.
        action: the action space types the agent takes.
        bounded_actions: Box actions must have finite bounds (e.g. a tanh policy mapped onto them).
    """

    observation: tuple[type[gym.Space], ...] = (gym.spaces.Box,)
    action: tuple[type[gym.Space], ...] = (gym.spaces.Discrete,)
    bounded_actions: bool = False


def declared_spaces(agent_class: type) -> Accepts | None:
    """The class's declared :class:`Accepts` (its ``accepts`` attribute), None if it declares none."""
    accepts = getattr(agent_class, "accepts", None)
    return accepts if isinstance(accepts, Accepts) else None


def missing_members(agent: Any) -> list[str]:
    """The attributes and methods of :class:`Agent` that ``agent`` lacks (for an error message);
    a method set to None is lacking, as ``isinstance`` takes it."""
    methods = {
        name for name, value in vars(Agent).items() if callable(value) and not name.startswith("_")
    }
    present = {
        name for name in dir(agent) if name not in methods or getattr(agent, name) is not None
    }
    return sorted((set(Agent.__annotations__) | methods) - present)
