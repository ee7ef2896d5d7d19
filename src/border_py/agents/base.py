"""The agent protocol: what a trainer and its actors need from a learning algorithm.

A user's own agent (``agent._target_=my_pkg.MyAgent``) implements these methods. Its constructor
receives the keys of its YAML plus the runtime keyword arguments ``observation_space``,
``action_space``, ``device`` and ``seed``. Optional methods: ``set_epsilon(eps)`` (Ape-X actors,
``actor_manager.exploration=apex``) and ``set_exploration_step(env_steps)`` (a resumed actor
continues its exploration schedule).

Prioritized replay (``replay_buffer=prioritized``) needs more, checked before anything starts:

- the class attribute ``reports_td_error = True``: ``update(batch)`` multiplies its per-sample
  losses by ``batch.weight`` (importance-sampling weights, when not None) exactly once, and when
  ``batch.index`` is set returns, among its metrics, ``"td_error"``: a float32 numpy array (B,) of
  non-negative per-sample TD-error magnitudes, which become the sampled rows' new priorities (the
  trainer removes it from the metrics). Without the attribute the run fails with one line.
- with ``replay_buffer.priority_from_actors=true``, a method ``td_error(batch) -> np.ndarray``:
  the same magnitudes for a batch of fresh transitions, computed by an actor's copy of the policy
  (no gradient, no state change, only the policy weights: bootstrap from the online network).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import torch

from border_py.transitions import Transitions


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

    def state_dict(self) -> dict[str, object]:
        """The full training state (networks, targets, optimizers, counters), tensors and numbers only."""

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict`."""
