"""The guarantees of an agent that acts with a recurrent state
(:class:`~border_py.agents.base.RecurrentActing`, R2D2), checked by
:func:`~border_py.agents.check.check_agent` besides the protocol's: one function each, raising
:class:`~border_py.agents.check_probe.AgentCheckError` naming the guarantee.

Its actors keep each env's state, start it from ``initial_state`` and zero it at every episode
start, and hand it to ``act_recurrent`` with the previous action and reward
(:mod:`border_py.actors.recurrent`); its learner starts each stored sequence from the state the
actor had there and must learn nothing from the sequence's padding (:mod:`border_py.sequences`).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from border_py.agents.base import reports_td_error
from border_py.agents.check_probe import OBS_ROWS, Probe, plain_metrics, prioritized
from border_py.agents.check_sequences import garbled, padded
from border_py.agents.contract import AgentContractError, check_actions
from border_py.config import count, positive_count
from border_py.sequences import Sequences

__all__ = ["act_shapes", "acts_on_its_state", "attributes", "initial_state", "padding_inert"]


def attributes(probe: Probe, agent: Any) -> None:
    """Part of the guarantee ``attributes`` (its actors cut sequences with them): ``burn_in`` an
    int >= 0, ``length`` a positive int, ``period`` an int in [1, length]; and a Discrete action
    space (sequences store int64 actions, -1 for none)."""
    burn_in, length, period = agent.burn_in, agent.length, agent.period
    if not count.ok(burn_in):
        probe.fail("attributes", f"burn_in={burn_in!r}, not an int >= 0")
    if not positive_count.ok(length):
        probe.fail("attributes", f"length={length!r}, not a positive int")
    if not positive_count.ok(period) or period > length:
        probe.fail("attributes", f"period={period!r}, not an int in [1, length={length}]")
    _n_actions(probe)


def _n_actions(probe: Probe) -> int:
    """The actions of the env's Discrete action space; fails ``accepts the env's spaces`` for
    another space (sequences store int64 actions, -1 for none)."""
    space = probe.env.action_space
    if not isinstance(space, gym.spaces.Discrete):
        detail = f"a recurrent agent acts on Discrete actions, not {space}"
        probe.fail("accepts the env's spaces", detail)
    return int(space.n)


def _zeros_of(probe: Probe, guarantee: str, what: str, state: Any, rows: int) -> None:
    """Fail ``guarantee`` unless ``state`` (``what``) is float32 zeros ``(rows, k, hidden)``."""
    if not isinstance(state, np.ndarray) or state.dtype != np.float32 or state.ndim != 3:
        found = f"shape {state.shape} dtype {state.dtype}" if hasattr(state, "shape") else state
        probe.fail(guarantee, f"{what} is {found!r}, not a float32 numpy array (n, k, hidden)")
    if state.shape[0] != rows or 0 in state.shape:
        probe.fail(guarantee, f"{what} has shape {state.shape}, not ({rows}, k, hidden)")
    if (state != 0).any():
        detail = "its actors zero each env's state at every episode start"
        probe.fail(guarantee, f"{what} is not all zeros ({detail})")


def initial_state(probe: Probe, agent: Any) -> None:
    """Guarantee ``initial state``: ``initial_state(n)`` is float32 zeros ``(n, k, hidden)``, the
    same ``(k, hidden)`` for any ``n``. Sets the probe's acting inputs: row 0 an episode's start
    (zeros, -1, 0.0), the others a state, previous action and reward drawn (seeded)."""
    guarantee, shapes = "initial state", set()
    for rows in (1, OBS_ROWS):
        state = agent.initial_state(rows)
        _zeros_of(probe, guarantee, f"initial_state({rows})", state, rows)
        shapes.add(state.shape[1:])
    if len(shapes) > 1:
        probe.fail(guarantee, f"initial_state(n) holds states of shapes {sorted(shapes)}")
    rng = np.random.default_rng(probe.seed)
    probe.state = rng.uniform(-0.5, 0.5, (OBS_ROWS, *shapes.pop())).astype(np.float32)
    probe.state[0] = 0.0
    probe.prev_action = rng.integers(0, _n_actions(probe), OBS_ROWS)
    probe.prev_reward = rng.normal(size=OBS_ROWS).astype(np.float32)
    probe.prev_action[0], probe.prev_reward[0] = -1, 0.0
    probe.recurrent = True
    probe.passed(guarantee)


def _acted(probe: Probe, agent: Any, rows: int, explore: bool, state: np.ndarray) -> np.ndarray:
    """The next state ``act_recurrent`` returns for the first ``rows`` observations from
    ``state``, failing ``act shapes`` unless it returns actions of the action space and a next
    state like ``state``, finite."""
    call = f"act_recurrent on a batch of {rows}, explore={explore}"
    inputs = (probe.obs[:rows], state.copy(), probe.prev_action[:rows], probe.prev_reward[:rows])
    out = agent.act_recurrent(*(x.copy() for x in inputs), explore)
    if not isinstance(out, tuple) or len(out) != 2:
        probe.fail("act shapes", f"{call} returned a {type(out).__name__}, not (actions, state)")
    actions, after = out
    try:
        check_actions(agent, inputs[0], actions, probe.env.action_space)
    except AgentContractError as exc:
        probe.fail("act shapes", f"{call}: {exc}")
    if not isinstance(after, np.ndarray) or after.shape != state.shape or after.dtype != np.float32:
        found = f"shape {after.shape} dtype {after.dtype}" if hasattr(after, "shape") else after
        what = f"a float32 numpy array {state.shape}, as the state given"
        probe.fail("act shapes", f"{call}: the next state is {found!r}, not {what}")
    if not np.isfinite(after).all():
        probe.fail("act shapes", f"{call}: the next state holds non-finite values")
    return after


def act_shapes(probe: Probe, agent: Any) -> None:
    """Part of the guarantee ``act shapes``: ``act_recurrent`` returns ``(actions, next_state)``
    for a batch of 1 and of several, greedy and exploring, from an episode's start and from
    other states: actions of the action space, a finite float32 next state shaped like the
    state given."""
    for rows in (1, OBS_ROWS):
        for explore in (False, True):
            _acted(probe, agent, rows, explore, agent.initial_state(rows))
            _acted(probe, agent, rows, explore, probe.state[:rows])


def acts_on_its_state(probe: Probe, agent: Any) -> None:
    """Guarantee ``acts on its state``: the next state ``act_recurrent`` returns depends on the
    state it is given: from each row's state and from an episode's start it differs (an agent
    that drops the state it is handed, or keeps one of its own, has no memory to learn)."""
    guarantee = "acts on its state"
    fresh = _acted(probe, agent, OBS_ROWS, False, agent.initial_state(OBS_ROWS))
    carried = _acted(probe, agent, OBS_ROWS, False, probe.state)
    for row in range(1, OBS_ROWS):
        if np.array_equal(fresh[row], carried[row]):
            what = "act_recurrent's next state from a state and from zeros"
            probe.fail(guarantee, f"{what} are equal (row {row}): the state given is ignored")
    probe.passed(guarantee)


def padding_inert(probe: Probe) -> None:
    """Guarantee ``padding changes nothing``: ``update`` on the batches and on them with other
    values where they pad (:func:`~border_py.agents.check_sequences.garbled`: observations
    outside the episode, the targets of learning steps without an action) makes the same step:
    the same metrics (with ``td_error``, each sequence's priority, for an agent that
    :func:`reports_td_error`: the batches then sampled with weights 1) and the same state after.
    Not checked (nor listed) when no batch pads."""
    guarantee, plain, garbling = "padding changes nothing", probe.build(), probe.build()
    batches: list[Any] = [b for b in probe.batches if isinstance(b, Sequences)]
    if not any(padded(b) for b in batches):
        return
    if reports_td_error(plain):
        batches = [prioritized(b, np.ones(len(b), np.float32)) for b in batches]
    for step, batch in enumerate(batches):
        expected = plain_metrics(plain.update(batch))
        metrics = plain_metrics(garbling.update(garbled(batch, _n_actions(probe))))
        what = f"update(batch)'s metrics at step {step}, with other values where it pads"
        probe.same(guarantee, what, expected, metrics)
    what = "state_dict() after updates on batches with other values where they pad"
    probe.same(guarantee, what, plain.state_dict(), garbling.state_dict())
    probe.passed(guarantee)
