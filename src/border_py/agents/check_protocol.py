"""The guarantees every agent gives (:class:`~border_py.agents.base.Agent`), one function each, in
the order :func:`~border_py.agents.check.check_agent` runs them; each raises
:class:`~border_py.agents.check_probe.AgentCheckError` naming the guarantee it checks.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import torch

from border_py.agents.check_probe import Probe, plain_metrics, snapshot, through_file
from border_py.agents.contract import AgentContractError, check_actions
from border_py.config import is_number, positive_count

__all__ = [
    "act_shapes",
    "attributes",
    "built",
    "continues_identically",
    "deterministic",
    "greedy_changes_nothing",
    "plain_data",
    "policy_state",
    "state_round_trip",
    "trained",
]


def _global_rngs() -> dict[str, Any]:
    """The states of torch's (CPU), numpy's and Python's global random generators."""
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(legacy=False),
        "random": random.getstate(),
    }


def built(probe: Probe) -> Any:
    """Guarantee ``constructor leaves the global RNGs alone``: building the agent draws from none
    of torch's (CPU), numpy's or Python's global generators. Returns the agent built."""
    guarantee, before = "constructor leaves the global RNGs alone", _global_rngs()
    agent = probe.build()
    probe.passed("builds for the env's spaces")
    probe.passed("protocol")
    probe.same(guarantee, "the global generators' states", before, _global_rngs(), exact=True)
    probe.passed(guarantee)
    return agent


def attributes(probe: Probe, agent: Any) -> None:
    """Guarantee ``attributes``: ``gamma`` a float in [0, 1], ``n_step`` and ``batch_size``
    positive ints."""
    gamma, n_step, size = agent.gamma, agent.n_step, agent.batch_size
    if not is_number(gamma) or not 0 <= gamma <= 1:
        probe.fail("attributes", f"gamma={gamma!r}, not a float in [0, 1]")
    for key, value in (("n_step", n_step), ("batch_size", size)):
        if not positive_count.ok(value):
            probe.fail("attributes", f"{key}={value!r}, not a positive int")
    probe.passed("attributes")


def _readable(probe: Probe, guarantee: str, method: str, value: Any) -> Any:
    """``value``, what ``method`` returned, read back as checkpoints are; fails ``guarantee`` if
    ``torch.load(weights_only=True)`` refuses it (not plain data)."""
    try:
        return through_file(value)
    except ValueError as exc:
        probe.fail(guarantee, f"torch.load(weights_only=True) refuses {method}(): {exc}")


def plain_data(probe: Probe, agent: Any) -> None:
    """Before anything compares states: ``state_dict`` ("state round trip") and ``policy_state``
    ("policy state") are plain data, as checkpoints need (checked again after training)."""
    _readable(probe, "state round trip", "state_dict", agent.state_dict())
    _readable(probe, "policy state", "policy_state", agent.policy_state())


def deterministic(probe: Probe, agent: Any) -> None:
    """Guarantee ``deterministic given seed``: another agent built with the same seed has the
    same state and policy and takes the same actions, greedy and exploring."""
    twin, guarantee = probe.build(), "deterministic given seed"
    probe.same(guarantee, "state_dict()", agent.state_dict(), twin.state_dict(), exact=True)
    probe.same(guarantee, "policy_state()", agent.policy_state(), twin.policy_state(), exact=True)
    first, second = probe.build(), probe.build()
    for explore in (False, True, True):
        what = probe.call(explore)
        probe.same(guarantee, what, probe.act(first, explore), probe.act(second, explore))
    probe.passed(guarantee)


def act_shapes(probe: Probe, agent: Any) -> None:
    """Guarantee ``act shapes``: one action of the action space per observation, for a batch of 1
    and of several, greedy and exploring (:func:`~border_py.agents.contract.check_actions`)."""
    for rows in (1, len(probe.obs)):
        for explore in (False, True):
            obs = probe.obs[:rows]
            try:
                check_actions(agent, obs, agent.act(obs, explore), probe.env.action_space)
            except AgentContractError as exc:
                probe.fail("act shapes", f"explore={explore}: {exc}")
    probe.passed("act shapes")


def greedy_changes_nothing(probe: Probe, agent: Any) -> None:
    """Guarantee ``greedy act changes nothing``: ``act(obs, explore=False)`` (a recurrent agent's
    ``act_recurrent``) leaves the state as it was and gives the same actions again."""
    guarantee, before = "greedy act changes nothing", snapshot(agent.state_dict())
    first, call = probe.act(agent, False), probe.call(False)
    probe.same(guarantee, f"a second {call}", first, probe.act(agent, False))
    probe.same(guarantee, f"state_dict() after {call}", before, agent.state_dict())
    probe.passed(guarantee)


def _scalars(probe: Probe, guarantee: str, method: str, values: Any, skip: str = "") -> None:
    if not isinstance(values, dict) or not all(isinstance(key, str) for key in values):
        probe.fail(guarantee, f"{method} returned a {type(values).__name__}, not a dict by name")
    for key, value in values.items():
        if key == skip:
            continue
        scalar = is_number(value)
        if isinstance(value, torch.Tensor) and value.ndim == 0:
            scalar, value = True, float(value)
        if not scalar or not math.isfinite(value):
            probe.fail(guarantee, f"{method}[{key!r}] is {value!r}, not a finite scalar")


def trained(probe: Probe, agent: Any) -> None:
    """Guarantees ``update metrics`` and ``exploration stats``: ``probe.updates`` updates, each
    after an exploring ``act``; ``update`` returns finite scalars by name (``td_error`` aside)
    and ``exploration_stats`` too; the policy's keys and shapes stay (actors receive them in a
    buffer laid out once)."""
    layout = {key: tuple(value.shape) for key, value in agent.policy_state().items()}
    for batch in probe.batches:
        probe.act(agent, True)
        _scalars(probe, "update metrics", "update(batch)", agent.update(batch), skip="td_error")
        _scalars(probe, "exploration stats", "exploration_stats()", agent.exploration_stats())
    after = {key: tuple(value.shape) for key, value in agent.policy_state().items()}
    probe.same("policy state", "policy_state()'s keys and shapes after updates", layout, after)
    probe.passed("update metrics")
    probe.passed("exploration stats")


def _as_published(policy: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
    """The policy as actors receive it: float32 views of one flat buffer (the buffer, the views)."""
    flat = torch.cat([value.detach().reshape(-1).float() for value in policy.values()])
    views, offset = {}, 0
    for key, value in policy.items():
        views[key] = flat[offset : offset + value.numel()].view(value.shape)
        offset += value.numel()
    return flat, views


def policy_state(probe: Probe, agent: Any) -> None:
    """Guarantee ``policy state``: CPU tensors that a checkpoint's ``weights_only`` load reads
    back; an agent of another seed that loads them, as float32 views of one buffer, acts greedily
    as ``agent`` does, and keeps acting so once the buffer is overwritten (``load_policy_state``
    copies)."""
    guarantee, policy = "policy state", agent.policy_state()
    for key, value in policy.items():
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
            where = value.device if isinstance(value, torch.Tensor) else type(value).__name__
            probe.fail(guarantee, f"policy_state()[{key!r}] is not a CPU tensor ({where})")
    _readable(probe, guarantee, "policy_state", policy)
    copy_ = probe.build(probe.seed + 1)
    flat, views = _as_published(policy)
    copy_.load_policy_state(views)
    greedy = probe.act(copy_, False)
    what = f"{probe.call(False)} of an agent of another seed that loaded policy_state()"
    probe.same(guarantee, what, probe.act(agent, False), greedy)
    loaded = snapshot(copy_.policy_state())
    flat.add_(1.0)  # the buffer the weights came in is written again (the next publication)
    what = "policy_state() once the tensors given to load_policy_state changed (keep a copy)"
    probe.same(guarantee, what, loaded, copy_.policy_state(), exact=True)
    probe.passed(guarantee)


def state_round_trip(probe: Probe, agent: Any) -> Any:
    """Guarantee ``state round trip``: ``state_dict`` survives ``torch.load(weights_only=True)``
    (tensors, numbers, strings and containers of them) and an agent of another seed that loads it
    has the same ``state_dict``. Returns that agent."""
    guarantee = "state round trip"
    saved = _readable(probe, guarantee, "state_dict", agent.state_dict())
    fresh = probe.build(probe.seed + 1)
    fresh.load_state_dict(saved)
    what = "state_dict() of an agent of another seed after load_state_dict(saved state)"
    probe.same(guarantee, what, agent.state_dict(), fresh.state_dict(), exact=True)
    probe.passed(guarantee)
    return fresh


def continues_identically(probe: Probe, agent: Any, restored: Any) -> None:
    """Guarantee ``continue identically after save/load``: the agent and the one that loaded its
    state take the same exploring actions and make the same updates, step after step."""
    guarantee = "continue identically after save/load"
    for step, batch in enumerate(probe.batches):
        where = f"at step {step} after the load"
        what = f"{probe.call(True)} {where}"
        probe.same(guarantee, what, probe.act(agent, True), probe.act(restored, True))
        a, b = plain_metrics(agent.update(batch)), plain_metrics(restored.update(batch))
        probe.same(guarantee, f"update(batch)'s metrics {where}", a, b)
    what = f"state_dict() after {len(probe.batches)} steps"
    probe.same(guarantee, what, agent.state_dict(), restored.state_dict())
    probe.passed(guarantee)
