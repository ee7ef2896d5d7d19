"""``check_agent``: run the agent contract's guarantees over an agent class on a real env.

What gymnasium's ``check_env`` is for an env, :func:`check_agent` is for an agent
(docs/05-customization/agents.md, "Check your agent"): it builds the class for the env's spaces,
feeds it transitions collected from the env, and raises :class:`AgentCheckError`, one line naming
the guarantee, at the first one broken. The guarantees of the protocol
(:mod:`border_py.agents.check_protocol`) are checked for every agent, in this order:

- ``accepts the env's spaces`` (a class that declares ``accepts``), ``builds for the env's
  spaces``, ``protocol`` (every member of :class:`~border_py.agents.base.Agent`);
- ``constructor leaves the global RNGs alone``, ``attributes``, ``deterministic given seed``;
- ``act shapes`` (a batch of 1 and of several, greedy and exploring), ``greedy act changes
  nothing``;
- ``update metrics``, ``exploration stats``, ``policy state`` (CPU tensors an agent of another
  seed acts with, copied on load);
- ``state round trip`` and ``continue identically after save/load``;

then those of the optional capabilities the agent has
(:mod:`border_py.agents.check_capabilities`): ``prefetch parity``, ``prioritized replay``,
``TD-error scoring``, ``value acting``, ``fixed epsilon``, ``acting precision``.

An agent that acts with a recurrent state (:class:`~border_py.agents.base.RecurrentActing`, R2D2)
learns on sequences its actors cut (:mod:`border_py.agents.check_sequences`) and acts with
``act_recurrent``: the guarantees above then act through it (from an episode's start and from
other states) and update on sequence batches, and its own
(:mod:`border_py.agents.check_recurrent`) join them: ``initial state`` (after ``attributes``),
``act shapes`` of ``act_recurrent`` too, ``acts on its state`` (after ``act shapes``) and
``padding changes nothing`` (after ``continue identically after save/load``). ``value acting``
does not apply to it (its actors act through ``act_recurrent``, never on handed-out values).

What it cannot see from outside: that importance weights are applied exactly once (a weight of 1
changes nothing, which is checked), that an exploring schedule advances by one step per action,
and any state that a few updates leave untouched (a target network copied every 100 steps).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

from border_py.agents import check_capabilities as capabilities
from border_py.agents import check_protocol as protocol
from border_py.agents import check_recurrent as recurrent
from border_py.agents.base import (
    ActingPrecision,
    FixedEpsilon,
    RecurrentActing,
    TDErrorScoring,
    TensorUpdate,
    ValueActing,
    declared_spaces,
    reports_td_error,
)
from border_py.agents.check_probe import OBS_ROWS, AgentCheckError, Probe, collect, sample
from border_py.agents.check_sequences import collect_sequences, sample_sequences
from border_py.agents.spaces import check_spaces
from border_py.errors import ConfigError
from border_py.transitions import Transitions

__all__ = ["AgentCheckError", "check_agent"]


def check_agent(
    agent_class: type,
    env: gym.Env,
    hparams: Mapping[str, Any] | None = None,
    *,
    device: str = "cpu",
    seed: int = 0,
    updates: int = 3,
    tolerance: float = 0.0,
) -> list[str]:
    """Check that ``agent_class`` keeps the agent contract on ``env``.

    Example: ``check_agent(DQN, gym.make("CartPole-v1"), {"hidden_sizes": [32], "batch_size":
    16})``. Small networks and batches keep it to about a second.

    Args:
        agent_class: the agent's class, built as border builds it:
            ``agent_class(**hparams, observation_space=..., action_space=..., device=...,
            seed=...)``.
        env: a gymnasium env (not a vector env); its spaces and transitions (random actions,
            seeded) are what the agent gets (a recurrent agent: sequences cut as its actors cut
            them, of episodes a copy of it plays). It is reset and stepped.
        hparams: the agent's own keyword arguments (its YAML's keys).
        device: where the agent's networks live (``cpu``, ``cuda``).
        seed: the agent's seed (agents of other seeds load its states).
        updates: updates (and exploring steps) in each round trip.
        tolerance: the relative difference allowed where results must be equal: 0 (bitwise) on
            CPU; CUDA's kernels are not all deterministic (e.g. a ``gather``'s backward), so
            1e-5 or so there.

    Returns:
        The guarantees checked, in order (the optional capabilities' only for an agent that has
        them).

    Raises:
        AgentCheckError: one line: the agent's class, the guarantee it breaks and how.
    """
    probe = Probe(agent_class, env, dict(hparams or {}), device, seed, updates, tolerance)
    _accepts(probe)
    agent = protocol.built(probe)
    is_recurrent = isinstance(agent, RecurrentActing)
    if is_recurrent:
        recurrent.attributes(probe, agent)
    protocol.attributes(probe, agent)
    protocol.plain_data(probe, agent)
    experience = collect(env, agent.batch_size + OBS_ROWS, float(agent.gamma), seed)
    probe.obs = experience.obs[:OBS_ROWS]
    _acting(probe, agent, is_recurrent)
    _batches(probe, agent, experience)
    protocol.greedy_changes_nothing(probe, agent)
    protocol.trained(probe, agent)
    protocol.policy_state(probe, agent)
    restored = protocol.state_round_trip(probe, agent)
    protocol.continues_identically(probe, agent, restored)
    if is_recurrent:
        recurrent.padding_inert(probe)
    _capabilities(probe, agent)
    return probe.checked


def _accepts(probe: Probe) -> None:
    """Guarantee ``accepts the env's spaces``, for a class that declares ``accepts``."""
    if declared_spaces(probe.agent_class) is not None:
        env = probe.env
        try:
            check_spaces(probe.agent_class, env.observation_space, env.action_space)
        except ConfigError as exc:
            probe.fail("accepts the env's spaces", str(exc))
        probe.passed("accepts the env's spaces")


def _acting(probe: Probe, agent: Any, is_recurrent: bool) -> None:
    """The guarantees of acting, before any update (a recurrent agent's own among them)."""
    if is_recurrent:
        recurrent.initial_state(probe, agent)
    protocol.deterministic(probe, agent)
    if is_recurrent:
        recurrent.act_shapes(probe, agent)
    protocol.act_shapes(probe, agent)
    if is_recurrent:
        recurrent.acts_on_its_state(probe, agent)


def _batches(probe: Probe, agent: Any, experience: Transitions) -> None:
    """The probe's ``updates`` batches of ``batch_size`` rows: of ``experience``, or for a
    recurrent agent of sequences cut from episodes a copy of it plays."""
    rng, size = np.random.default_rng(probe.seed), agent.batch_size
    if not probe.recurrent:
        probe.batches = [sample(experience, rng, size) for _ in range(probe.updates)]
        return
    sequences = collect_sequences(probe.build(), probe.env, size, probe.seed)
    probe.batches = [sample_sequences(sequences, rng, size) for _ in range(probe.updates)]


def _capabilities(probe: Probe, agent: Any) -> None:
    """The checks of the optional capabilities ``agent`` has (``value acting`` not for a
    recurrent agent, whose actors act through ``act_recurrent``)."""
    if isinstance(agent, TensorUpdate):
        capabilities.prefetch_parity(probe)
    if reports_td_error(agent):
        capabilities.prioritized_replay(probe)
    if isinstance(agent, TDErrorScoring):
        capabilities.td_error_scoring(probe)
    if isinstance(agent, ValueActing) and not probe.recurrent:
        capabilities.value_acting(probe)
    if isinstance(agent, FixedEpsilon):
        capabilities.fixed_epsilon(probe)
    if isinstance(agent, ActingPrecision):
        capabilities.acting_precision(probe)
