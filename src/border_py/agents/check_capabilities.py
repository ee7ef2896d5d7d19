"""The guarantees of the optional capabilities (:mod:`border_py.agents.base`), checked by
:func:`~border_py.agents.check.check_agent` for an agent that declares or implements them: one
function each, raising :class:`~border_py.agents.check_probe.AgentCheckError` naming the
guarantee.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.base import reports_td_error
from border_py.agents.batch import TensorBatch
from border_py.agents.check_probe import Batch, Probe, plain_metrics, prioritized, snapshot
from border_py.agents.contract import AgentContractError, check_actions
from border_py.agents.sequence_batch import SequenceBatch
from border_py.transitions import Transitions

__all__ = [
    "acting_precision",
    "fixed_epsilon",
    "prefetch_parity",
    "prioritized_replay",
    "td_error_scoring",
    "value_acting",
]


def _weights(probe: Probe, rows: int) -> np.ndarray:
    """Importance weights as a prioritized buffer gives them: in (0, 1], the largest 1."""
    weight = np.random.default_rng(probe.seed).uniform(0.1, 1.0, rows).astype(np.float32)
    return weight / weight.max()


def _float32(probe: Probe, guarantee: str, what: str, values: Any, shape: tuple[int, ...]) -> None:
    """Fail ``guarantee`` unless ``values`` (``what``) is a float32 numpy array of ``shape``."""
    if not isinstance(values, np.ndarray) or values.shape != shape or values.dtype != np.float32:
        found = f"shape {values.shape} dtype {values.dtype}" if hasattr(values, "shape") else values
        probe.fail(guarantee, f"{what} is {found!r}, not a float32 numpy array {shape}")


def _td_errors(probe: Probe, guarantee: str, what: str, values: Any, rows: int) -> None:
    """Fail unless ``values`` are ``rows`` finite, non-negative float32 TD-error magnitudes."""
    _float32(probe, guarantee, what, values, (rows,))
    if not (np.isfinite(values).all() and (values >= 0).all()):
        probe.fail(guarantee, f"{what} holds negative or non-finite values")


def prefetch_parity(probe: Probe) -> None:
    """Guarantee ``prefetch parity`` (:class:`~border_py.agents.base.TensorUpdate`):
    ``update(batch)`` and ``update_tensors`` on the batch as the learner's prefetch converts it
    (:class:`TensorBatch`, a recurrent agent's sequences :class:`SequenceBatch`; pinned and
    copied without blocking on CUDA) make the same step: the same metrics (``td_error`` of a
    prioritized batch a tensor (B,) on the device, read back) and the same state after."""
    guarantee = "prefetch parity"
    inline, prefetched = probe.build(), probe.build()
    device, discrete = prefetched.device, prefetched.discrete_actions
    if not isinstance(device, torch.device) or not isinstance(discrete, bool):
        probe.fail(guarantee, f"device={device!r} and discrete_actions={discrete!r}")
    batches: list[Batch] = list(probe.batches)
    if reports_td_error(inline):
        batches += [prioritized(b, _weights(probe, len(b))) for b in probe.batches]
    for step, batch in enumerate(batches):
        expected = plain_metrics(inline.update(batch))
        metrics = prefetched.update_tensors(_converted(batch, device, discrete))
        td_error = metrics.get("td_error")
        if batch.index is not None:
            on_device = isinstance(td_error, torch.Tensor) and td_error.device.type == device.type
            if not on_device or tuple(td_error.shape) != (len(batch),):
                what = f"a tensor ({len(batch)},) on {device}"
                probe.fail(guarantee, f"update_tensors' td_error is {td_error!r}, not {what}")
        else:  # td_error is asked for only with a prioritized batch
            expected.pop("td_error", None)
            metrics.pop("td_error", None)
        what = f"update_tensors(converted batch)'s metrics at step {step}, against update(batch)'s"
        probe.same(guarantee, what, expected, plain_metrics(metrics))
    what = "state_dict() after update_tensors, against after update"
    probe.same(guarantee, what, inline.state_dict(), prefetched.state_dict())
    probe.passed(guarantee)


def _converted(batch: Batch, device: torch.device, discrete: bool) -> TensorBatch | SequenceBatch:
    """``batch`` as the learner's prefetch hands it to ``update_tensors``."""
    pinned = device.type == "cuda"
    if isinstance(batch, Transitions):
        return TensorBatch.of(batch, device, discrete, pinned=pinned)
    return SequenceBatch.of(batch, device, pinned=pinned)


def prioritized_replay(probe: Probe) -> None:
    """Guarantee ``prioritized replay`` (``reports_td_error = True``): ``update`` of a
    prioritized batch returns ``td_error``, float32 (B,) finite and non-negative, and with
    importance weights of 1 makes the step it makes on the plain batch."""
    guarantee = "prioritized replay"
    plain, weighted = probe.build(), probe.build()
    for step, batch in enumerate(probe.batches):
        expected = plain_metrics(plain.update(batch))
        metrics = plain_metrics(weighted.update(prioritized(batch, np.ones(len(batch), "f4"))))
        what = f"update(prioritized batch)['td_error'] at step {step}"
        _td_errors(probe, guarantee, what, metrics.pop("td_error", None), len(batch))
        expected.pop("td_error", None)
        what = f"update(batch with weights 1)'s metrics at step {step}, against update(batch)'s"
        probe.same(guarantee, what, expected, metrics)
    what = "state_dict() after updates on batches with weights 1, against on plain ones"
    probe.same(guarantee, what, plain.state_dict(), weighted.state_dict())
    probe.passed(guarantee)


def td_error_scoring(probe: Probe) -> None:
    """Guarantee ``TD-error scoring`` (:class:`~border_py.agents.base.TDErrorScoring`):
    ``td_error(batch)`` is float32 (B,), finite and non-negative, the same when asked again, and
    changes no state."""
    guarantee, agent, batch = "TD-error scoring", probe.build(), probe.batches[0]
    before = snapshot(agent.state_dict())
    first = agent.td_error(batch)
    _td_errors(probe, guarantee, "td_error(batch)", first, len(batch))
    probe.same(guarantee, "td_error(batch) asked again", first, agent.td_error(batch))
    probe.same(guarantee, "state_dict() after td_error(batch)", before, agent.state_dict())
    probe.passed(guarantee)


def value_acting(probe: Probe) -> None:
    """Guarantee ``value acting`` (:class:`~border_py.agents.base.ValueActing`):
    ``act_with_values`` takes ``act``'s actions (from the same state) with float32 values (B,
    n_actions), the greedy ones ``q_values(obs)``."""
    guarantee, obs, space = "value acting", probe.obs, probe.env.action_space
    if not isinstance(space, gym.spaces.Discrete):
        probe.fail(guarantee, f"values of each action need a Discrete action space, not {space}")
    acting, valuing, shape = probe.build(), probe.build(), (len(obs), int(space.n))
    for explore in (False, True):
        actions, values = valuing.act_with_values(obs, explore)
        call = f"act_with_values(obs, explore={explore})"
        probe.same(guarantee, f"{call}'s actions, against act's", acting.act(obs, explore), actions)
        _float32(probe, guarantee, f"{call}'s values", values, shape)
    q = valuing.q_values(obs)
    _float32(probe, guarantee, "q_values(obs)", q, shape)
    greedy = valuing.act_with_values(obs, False)[1]
    probe.same(
        guarantee, "act_with_values(obs, explore=False)'s values, against q_values", q, greedy
    )
    probe.passed(guarantee)


def _acts(probe: Probe, guarantee: str, agent: Any, explore: bool, setting: str) -> np.ndarray:
    """``agent``'s actions on ``probe.obs`` (:meth:`~border_py.agents.check_probe.Probe.act`),
    failing ``guarantee`` if they do not fit."""
    actions = probe.actions(agent, explore)
    try:
        check_actions(agent, probe.obs, actions, probe.env.action_space)
    except AgentContractError as exc:
        probe.fail(guarantee, f"after {setting}: {exc}")
    return actions


def fixed_epsilon(probe: Probe) -> None:
    """Guarantee ``fixed epsilon`` (:class:`~border_py.agents.base.FixedEpsilon`): exploring
    actions fit the action space with one epsilon for every row (0 and 1) and with one per row."""
    guarantee, agent = "fixed epsilon", probe.build()
    for epsilon in (0.0, 1.0, np.full(len(probe.obs), 0.5)):
        agent.set_epsilon(epsilon)
        _acts(probe, guarantee, agent, True, f"set_epsilon({epsilon!r})")
    probe.passed(guarantee)


def acting_precision(probe: Probe) -> None:
    """Guarantee ``acting precision`` (:class:`~border_py.agents.base.ActingPrecision`), on CPU
    where actors act: ``float32`` is among ``acting_dtypes()``, greedy actions fit the action
    space in each precision, and back in ``float32`` the agent acts as it did."""
    guarantee, agent = "acting precision", probe.build(device="cpu")
    dtypes = tuple(agent.acting_dtypes())
    if "float32" not in dtypes:
        probe.fail(guarantee, f"acting_dtypes() is {dtypes!r}, without float32")
    reference = probe.act(agent, False)
    for dtype in dtypes:
        agent.set_acting_dtype(dtype)
        _acts(probe, guarantee, agent, False, f"set_acting_dtype({dtype!r})")
    agent.set_acting_dtype("float32")
    what = f"{probe.call(False)} back in float32, against before"
    probe.same(guarantee, what, reference, probe.act(agent, False))
    probe.passed(guarantee)
