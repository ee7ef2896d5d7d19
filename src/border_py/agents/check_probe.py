"""What the checks of :func:`border_py.agents.check.check_agent` share: the error they raise, the
agents they build, the experience they feed them, how they make them act and how they compare
what comes out.

The experience is real: transitions collected from the env with uniformly random actions (seeded),
1-step ones (``discount`` is ``gamma``, 0 after a terminal step), which the contract allows for any
``n_step``; a recurrent agent's are sequences (:mod:`border_py.agents.check_sequences`).
Comparisons are exact by default (a relative tolerance for devices whose kernels are not bitwise
deterministic) and name the first place two states differ.
"""

from __future__ import annotations

import copy
import dataclasses
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
import torch

from border_py.agents.base import Agent, missing_members
from border_py.errors import first_line, printable
from border_py.sequences import Sequences
from border_py.transitions import Transitions

__all__ = [
    "OBS_ROWS",
    "AgentCheckError",
    "Batch",
    "Probe",
    "collect",
    "difference",
    "plain_metrics",
    "prioritized",
    "sample",
    "snapshot",
    "through_file",
]

OBS_ROWS = 5  # the batch of observations ``act`` gets in the batched checks
SHOWN = 8  # integer arrays (actions) up to this size are shown whole where they differ
Batch = Transitions | Sequences  # what an agent learns on: a recurrent agent's are sequences


class AgentCheckError(AssertionError):
    """An agent breaks a guarantee of the agent contract; the message is one line naming it.

    Attributes:
        guarantee: the name of the broken guarantee, e.g. ``state round trip``.
    """

    def __init__(self, agent_class: type, guarantee: str, detail: str) -> None:
        name = f"{agent_class.__module__}.{agent_class.__qualname__}"
        super().__init__(f"{name} breaks '{guarantee}': {detail}")
        self.guarantee = guarantee


def difference(a: Any, b: Any, tolerance: float = 0.0, path: str = "") -> str | None:
    """Where ``a`` and ``b`` (nested mappings, sequences, tensors, arrays, numbers) first differ,
    e.g. ``['q']['0.weight']: max |difference| 0.031``; None where they are equal. Floating
    tensors and floats may differ by ``tolerance`` times the largest magnitude of ``a``."""
    at = f"{path}: " if path else ""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            return f"{at}the keys {sorted(map(str, a))} and {sorted(map(str, b))}"
        found = (difference(a[key], b[key], tolerance, f"{path}[{key!r}]") for key in a)
        return next((d for d in found if d is not None), None)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        if len(a) != len(b):
            return f"{at}{len(a)} items and {len(b)}"
        found = (
            difference(x, y, tolerance, f"{path}[{i}]")
            for i, (x, y) in enumerate(zip(a, b, strict=True))
        )
        return next((d for d in found if d is not None), None)
    if isinstance(a, torch.Tensor | np.ndarray) or isinstance(b, torch.Tensor | np.ndarray):
        return _tensor_difference(a, b, tolerance, at)
    if isinstance(a, float) and isinstance(b, float):
        close = abs(a - b) <= tolerance * abs(a) or a == b or (a != a and b != b)  # NaN is NaN
        return None if close else f"{at}{a!r} and {b!r}"
    return None if a == b and type(a) is type(b) else f"{at}{a!r} and {b!r}"


def _tensor_difference(a: Any, b: Any, tolerance: float, at: str) -> str | None:
    if not isinstance(a, torch.Tensor | np.ndarray) or not isinstance(b, torch.Tensor | np.ndarray):
        return f"{at}a {type(a).__name__} and a {type(b).__name__}"
    x, y = torch.as_tensor(a).detach().cpu(), torch.as_tensor(b).detach().cpu()
    if x.shape != y.shape or x.dtype != y.dtype:
        return f"{at}shape {tuple(x.shape)} {x.dtype} and {tuple(y.shape)} {y.dtype}"
    if not x.is_floating_point():
        if torch.equal(x, y):
            return None
        if x.numel() <= SHOWN:
            return f"{at}{x.tolist()} and {y.tolist()}"
        return f"{at}{int((x != y).sum())} of {x.numel()} values differ"
    x, y = x.double(), y.double()
    both_nan = x.isnan() & y.isnan()
    gap = torch.where(both_nan, 0.0, (x - y).abs().nan_to_num(nan=float("inf")))
    largest = float(x.abs().nan_to_num(nan=0.0).max()) if x.numel() else 0.0
    if x.numel() == 0 or float(gap.max()) <= tolerance * largest:
        return None
    return f"{at}max |difference| {float(gap.max()):.3g} (largest |value| {largest:.3g})"


def snapshot(value: Any) -> Any:
    """A copy of ``value`` (a state dict, metrics) that later changes to the agent leave alone."""
    return copy.deepcopy(value)


def through_file(value: Any) -> Any:
    """``value`` saved with ``torch.save`` and read back with ``torch.load(weights_only=True)``,
    as checkpoints are read.

    Raises:
        ValueError: one line: what ``weights_only`` refused.
    """
    data = io.BytesIO()
    torch.save(value, data)
    data.seek(0)
    try:
        return torch.load(data, weights_only=True)
    except Exception as exc:  # torch's UnpicklingError: advice, then the unpickler's reason
        reason = str(exc).partition("WeightsUnpickler error: ")[2].split(". ")[0]
        raise ValueError(printable(reason.strip() or first_line(exc))) from None


def plain_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """Metrics as plain values: 0-d tensors as floats, a ``td_error`` tensor as a numpy array."""
    return {key: _plain(key, value) for key, value in metrics.items()}


def _plain(key: str, value: Any) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    return value.detach().cpu().numpy() if key == "td_error" else float(value)


def collect(env: gym.Env, steps: int, gamma: float, seed: int) -> Transitions:
    """``steps`` 1-step transitions of ``env`` under uniformly random actions (seeded)."""
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    rows: list[tuple[Any, ...]] = []
    while len(rows) < steps:
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, reward, next_obs, 0.0 if terminated else gamma))
        obs = env.reset()[0] if terminated or truncated else next_obs
    obs_, action_, reward_, next_, discount_ = zip(*rows, strict=True)
    return Transitions(
        np.stack(obs_),
        np.stack(action_),
        np.asarray(reward_, np.float32),
        np.stack(next_),
        np.asarray(discount_, np.float32),
    )


def sample(experience: Transitions, rng: np.random.Generator, size: int) -> Transitions:
    """``size`` rows drawn uniformly (with replacement) from ``experience``."""
    rows, e = rng.integers(0, len(experience), size), experience
    return Transitions(
        e.obs[rows], e.action[rows], e.reward[rows], e.next_obs[rows], e.discount[rows]
    )


def prioritized(batch: Batch, weight: np.ndarray) -> Batch:
    """``batch`` as a prioritized sample returns it: its rows' ``index`` and ``weight`` set."""
    return dataclasses.replace(batch, weight=weight, index=np.arange(len(batch), dtype=np.int64))


@dataclass
class Probe:
    """One :func:`~border_py.agents.check.check_agent` call: how to build the agent, the
    experience and observations it is fed, and how its failures are raised.

    Attributes:
        agent_class: the class checked.
        env: the env whose spaces it is built for and whose transitions it learns from.
        hparams: the keyword arguments the constructor gets besides the four runtime ones.
        device: where the agent's networks live.
        seed: the seed of the agent checked (the fresh agents states are loaded into get others).
        updates: the updates (and exploring steps) of the round-trip checks.
        tolerance: the relative difference allowed between floats that should be equal.
        obs: observations of the env, ``(OBS_ROWS, *observation_space.shape)``.
        batches: ``updates`` batches of the agent's ``batch_size`` transitions (a recurrent
            agent's: sequences).
        checked: the guarantees checked so far, in order.
        recurrent: the agent acts with a recurrent state
            (:class:`~border_py.agents.base.RecurrentActing`): the checks act with
            ``act_recurrent`` on the inputs below.
        state: each row of ``obs``'s recurrent state, float32 ``(OBS_ROWS, k, hidden)`` (row 0
            at an episode's start: zeros).
        prev_action: the action before each row of ``obs`` (row 0: -1, none).
        prev_reward: the reward before each row of ``obs`` (row 0: 0.0).
    """

    agent_class: type
    env: gym.Env
    hparams: dict[str, Any]
    device: str
    seed: int
    updates: int
    tolerance: float
    obs: np.ndarray = field(default_factory=lambda: np.empty(0))
    batches: list[Batch] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)
    recurrent: bool = False
    state: np.ndarray = field(default_factory=lambda: np.empty(0))
    prev_action: np.ndarray = field(default_factory=lambda: np.empty(0))
    prev_reward: np.ndarray = field(default_factory=lambda: np.empty(0))

    def build(self, seed: int | None = None, device: str | None = None) -> Any:
        """A fresh agent, seeded with ``seed`` and on ``device`` (None: the probe's)."""
        try:
            agent = self.agent_class(
                **self.hparams,
                observation_space=self.env.observation_space,
                action_space=self.env.action_space,
                device=self.device if device is None else device,
                seed=self.seed if seed is None else seed,
            )
        except Exception as exc:
            self.fail("builds for the env's spaces", f"{type(exc).__name__}: {first_line(exc)}")
        if not isinstance(agent, Agent):
            self.fail("protocol", f"lacks {', '.join(missing_members(agent))}")
        return agent

    def act(self, agent: Any, explore: bool) -> Any:
        """What ``agent`` does on ``obs``, as actors ask it: ``act(obs, explore)``'s actions, or a
        recurrent agent's ``act_recurrent`` on the probe's states, previous actions and rewards
        (copies): its ``(actions, next_state)``."""
        if not self.recurrent:
            return agent.act(self.obs, explore)
        state, action, reward = self.state.copy(), self.prev_action.copy(), self.prev_reward.copy()
        return agent.act_recurrent(self.obs.copy(), state, action, reward, explore)

    def call(self, explore: bool) -> str:
        """How :meth:`act` asks, in words (for a message)."""
        if not self.recurrent:
            return f"act(obs, explore={explore})"
        return f"act_recurrent(obs, state, prev_action, prev_reward, explore={explore})"

    def actions(self, agent: Any, explore: bool) -> Any:
        """The actions of :meth:`act` alone."""
        acted = self.act(agent, explore)
        return acted[0] if self.recurrent else acted

    def fail(self, guarantee: str, detail: str) -> NoReturn:
        """Raise :class:`AgentCheckError` for ``guarantee``."""
        raise AgentCheckError(self.agent_class, guarantee, detail)

    def same(self, guarantee: str, what: str, a: Any, b: Any, exact: bool = False) -> None:
        """Fail ``guarantee`` unless ``a`` and ``b`` are equal (within the tolerance unless
        ``exact``); ``what`` says what was compared."""
        found = difference(a, b, 0.0 if exact else self.tolerance)
        if found is not None:
            self.fail(guarantee, f"{what}: {found}")

    def passed(self, guarantee: str) -> None:
        """Record ``guarantee`` as checked."""
        self.checked.append(guarantee)
