"""What an agent takes in memory and in a checkpoint, estimated from its keys and spaces before any
of it is allocated.

An agent class may say what it takes with a classmethod ``footprint(observation_space,
action_space, **keys) -> Footprint`` (DQN, IQN and SAC do, through :func:`dqn_footprint`,
:func:`iqn_footprint` and :func:`sac_footprint`). Their networks are built on PyTorch's ``meta``
device, which records shapes and allocates nothing, so the parameter counts are exact for every
torso (MLP, Nature and MinAtar CNNs, dueling and quantile heads), and one sample's forward pass
counts the activations an update keeps per sample (on the CPU under :data:`REAL_BELOW`
parameters: an operation on meta imports ``torch._dynamo``, 1.5 s of start-up) (against the peak memory of real updates
from 10 MiB to 1 GiB: 0.5x-2.6x, and high rather than low above 100 MiB). :func:`check_agent_memory`
bounds both against the memory available (see :mod:`border_py.resources`) before a learner's agent
is built; :func:`check_agent_weights` bounds what building an agent to act allocates, its
networks' weights. Both first bound the keys that would make the estimate itself slow
(:func:`check_agent_ranges`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch
from torch import nn

from border_py.agents.continuous import GaussianPolicy, QEnsemble
from border_py.agents.networks import QuantileNetwork, flat_dim, input_scale, q_network
from border_py.agents.spaces import check_spaces
from border_py.config import coerce_counts, config_keys, is_int, resolve_target
from border_py.errors import ConfigError, first_line
from border_py.resources import (
    MAX_HIDDEN_LAYERS,
    MAX_N_STEP,
    at_most,
    bound,
    memory,
    size_text,
)

__all__ = [
    "Footprint",
    "check_agent_memory",
    "check_agent_weights",
    "dqn_footprint",
    "iqn_footprint",
    "sac_footprint",
]

FLOAT = 4  # bytes of a float32: every parameter and activation of border's agents
LOSS_TERMS = 8  # tensors of shape (B, N, N') IQN's quantile loss and its gradient hold (about)


@dataclass(frozen=True)
class Footprint:
    """An agent's sizes in bytes, estimated before it is built.

    Attributes:
        policy: the acting network's weights (``policy.pt``).
        weights: every network's weights: the online ones and their targets.
        trained: the weights the optimizer updates; each has a gradient and Adam's two moments.
        update: one update's activations and their gradients, at the batch size.
        networks_setting: the ``key=value`` that sizes the networks (``agent.hidden_sizes=...``).
        update_setting: the ``key=value`` that sizes one update (``agent.batch_size=...``).
    """

    policy: int
    weights: int
    trained: int
    update: int
    networks_setting: str
    update_setting: str

    @property
    def networks(self) -> int:
        """The networks in memory: their weights, and the gradients and moments of the trained."""
        return self.weights + 3 * self.trained

    @property
    def checkpoint(self) -> int:
        """A checkpoint's weights: ``policy.pt``, and ``agent.pt`` with the optimizer's moments."""
        return self.policy + self.weights + 2 * self.trained


REAL_BELOW = 1 << 22  # parameters (16 MiB): a network this small is built and run on the CPU


def shaped(build: Callable[[], nn.Module]) -> nn.Module:
    """The module ``build`` makes, the global RNG left as it was: on the ``meta`` device (nothing
    allocated) from :data:`REAL_BELOW` parameters, else built again on the CPU."""
    with torch.random.fork_rng(devices=[]):
        with torch.device("meta"):
            module = build()
        if sum(p.numel() for p in module.parameters()) >= REAL_BELOW:
            return module
        with torch.device("cpu"):
            return build()


def parameter_bytes(module: nn.Module) -> int:
    """Bytes of ``module``'s parameters (float32)."""
    return FLOAT * sum(p.numel() for p in module.parameters())


def sample(space: gym.Space, module: nn.Module) -> torch.Tensor:
    """One observation of ``space`` (zeros, with a batch dim) where ``module`` is."""
    dtype = torch.uint8 if space.dtype == "uint8" else torch.float32
    device = next(module.parameters()).device
    return torch.zeros((1, *(space.shape or ())), dtype=dtype, device=device)


def forward_floats(module: nn.Module, *inputs: torch.Tensor) -> int:
    """Elements one forward pass of ``module`` (built by :func:`shaped`) makes: its inputs (converted
    to float), the outputs of every leaf module and of ``module`` itself; about what autograd keeps
    for the backward pass."""
    total = 0

    def count(_: nn.Module, __: Any, out: Any) -> None:
        nonlocal total
        total += sum(t.numel() for t in (out if isinstance(out, tuple) else (out,)))

    leaves = [m for m in module.modules() if m is not module and not any(m.children())]
    handles = [leaf.register_forward_hook(count) for leaf in leaves]
    try:
        with torch.no_grad():
            out = module(*inputs)
    finally:
        for handle in handles:
            handle.remove()
    outputs = out if isinstance(out, tuple) else (out,)
    return total + sum(t.numel() for t in (*inputs, *outputs))


def dqn_footprint(
    observation_space: gym.Space,
    n_actions: int,
    hidden_sizes: Sequence[int],
    network: str,
    dueling: bool,
    double_dqn: bool,
    batch_size: int,
) -> Footprint:
    """DQN's: the Q-network and its target, and an update that keeps ``Q(s)``'s activations and
    a gradient beside ``Q_target(s')`` (and ``Q(s')`` for double DQN) at the batch size."""
    q = shaped(lambda: q_network(observation_space, n_actions, hidden_sizes, network, dueling))
    size = parameter_bytes(q)
    per_sample = forward_floats(q, sample(observation_space, q)) * (2 + double_dqn)
    return Footprint(
        policy=size,
        weights=2 * size,
        trained=size,
        update=FLOAT * batch_size * per_sample,
        networks_setting=f"agent.hidden_sizes={list(hidden_sizes)}",
        update_setting=f"agent.batch_size={batch_size}",
    )


def iqn_footprint(
    observation_space: gym.Space,
    n_actions: int,
    hidden_sizes: Sequence[int],
    network: str,
    n_cos: int,
    levels: tuple[int, int, int],
    batch_size: int,
) -> Footprint:
    """IQN's: the quantile network and its target, and an update at the batch size: the online
    network at N levels (activations and a gradient), the target's at N' and K (``levels``: N,
    N', K), and the loss's N x N' terms (:data:`LOSS_TERMS` tensors of them)."""
    z = shaped(lambda: QuantileNetwork(observation_space, n_actions, hidden_sizes, network, n_cos))
    size = parameter_bytes(z)

    def forward(n: int) -> int:  # one sample at n levels
        levels = torch.zeros((1, n), device=next(z.parameters()).device)
        return forward_floats(z, sample(observation_space, z), levels)

    n_tau, n_tau_prime, k = levels
    per_sample = 2 * forward(n_tau) + forward(n_tau_prime) + forward(k)
    per_sample += LOSS_TERMS * n_tau * n_tau_prime
    return Footprint(
        policy=size,
        weights=2 * size,
        trained=size,
        update=FLOAT * batch_size * per_sample,
        networks_setting=f"agent.hidden_sizes={list(hidden_sizes)}",
        update_setting=f"agent.batch_size={batch_size} x n_tau={n_tau} x n_tau_prime={n_tau_prime}",
    )


def sac_footprint(
    observation_space: gym.Space,
    action_space: gym.Space,
    hidden_sizes: Sequence[int],
    n_critics: int,
    batch_size: int,
) -> Footprint:
    """SAC's: the policy, the critics and their targets, and an update at the batch size: the
    critics' and the policy's activations with a gradient each, beside the target critics'."""
    obs_dim, scale = flat_dim(observation_space.shape or ()), input_scale(observation_space)
    act_dim = flat_dim(action_space.shape or ())
    policy = shaped(lambda: GaussianPolicy(obs_dim, hidden_sizes, act_dim, scale))
    critics = shaped(lambda: QEnsemble(obs_dim, act_dim, hidden_sizes, n_critics, scale))
    p, c = parameter_bytes(policy), parameter_bytes(critics)
    policy_floats = forward_floats(policy, sample(observation_space, policy))
    # each critic: its input, every hidden layer before and after the ReLU, its value
    critic_floats = n_critics * (obs_dim + act_dim + 2 * sum(hidden_sizes) + 1)
    return Footprint(
        policy=p,
        weights=p + 2 * c,
        trained=p + c,
        update=FLOAT * batch_size * (2 * policy_floats + 3 * critic_floats),
        networks_setting=f"agent.hidden_sizes={list(hidden_sizes)}",
        update_setting=f"agent.batch_size={batch_size}",
    )


def footprint_of(
    spec: dict[str, Any], spaces: tuple[gym.Space, gym.Space]
) -> tuple[str, Footprint] | None:
    """(the agent's class name, its :class:`Footprint`) for the ``agent`` config ``spec``; None
    when its class has no ``footprint`` or it cannot estimate these keys (a subclass's own), or
    when ``spec`` has a mistake that building the agent reports in one line (no ``_target_``, a
    bad key, value or space).

    Raises:
        ConfigError: the ``_target_`` cannot be imported.
        OverflowError: valid keys whose sizes PyTorch cannot even represent (the one line to
            say, naming ``agent.hidden_sizes``).
    """
    if spec.get("_target_") in (None, "???"):
        return None
    target = resolve_target(spec["_target_"], "agent._target_")
    estimate = getattr(target, "footprint", None)
    kwargs = {k: v for k, v in spec.items() if not k.startswith("_")}
    keys = config_keys(target, "agent")
    if estimate is None or (keys is not None and any(k not in keys for k in kwargs)):
        return None
    kwargs = coerce_counts(target, kwargs)
    try:
        check_spaces(target, *spaces)
        return target.__name__, estimate(*spaces, **kwargs)
    except ConfigError:  # a bad value or space: the build says so, naming the key
        return None
    except (RuntimeError, TypeError, ValueError) as exc:
        if "overflow" not in str(exc).lower():  # keys the estimate does not take (a subclass's)
            return None
        raise OverflowError(  # valid keys whose sizes are beyond int64
            f"agent.hidden_sizes={kwargs.get('hidden_sizes')}: {target.__name__}'s networks are"
            f" too large to build ({first_line(exc)}); lower it"
        ) from None


def count(value: Any) -> int | None:
    """``value`` as a count: an int, or an integral float (``1e3``, as YAML reads it); None for
    anything else (building the agent refuses it, naming the key)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if is_int(value) else None


def check_agent_ranges(spec: dict[str, Any], enforce: bool) -> None:
    """Bound ``agent.n_step`` by :data:`~border_py.resources.MAX_N_STEP` and the networks' depth
    (``len(agent.hidden_sizes)``) by :data:`~border_py.resources.MAX_HIDDEN_LAYERS`, before
    :func:`footprint_of` builds anything (see :func:`~border_py.resources.at_most`)."""
    n_step = count(spec.get("n_step"))
    if n_step is not None:
        at_most(
            "agent.n_step",
            n_step,
            MAX_N_STEP,
            "steps per n-step return (each env keeps as many rows pending)",
            enforce,
        )
    hidden = spec.get("hidden_sizes")
    if isinstance(hidden, (list, tuple)):
        at_most(
            "len(agent.hidden_sizes)",
            len(hidden),
            MAX_HIDDEN_LAYERS,
            "hidden layers (border's networks are plain MLPs)",
            enforce,
        )


def bounded_footprint(
    spec: dict[str, Any], spaces: tuple[gym.Space, gym.Space], enforce: bool
) -> tuple[str, Footprint] | None:
    """:func:`footprint_of` once :func:`check_agent_ranges` passed; sizes beyond what PyTorch
    can represent go to :func:`~border_py.resources.bound` (None with ``enforce`` false)."""
    check_agent_ranges(spec, enforce)
    try:
        return footprint_of(spec, spaces)
    except OverflowError as exc:
        bound(str(exc), enforce)
        return None


def check_agent_memory(
    spec: dict[str, Any], spaces: tuple[gym.Space, gym.Space], enforce: bool
) -> Footprint | None:
    """Bound the learner's agent ``spec`` describes (its class's ``footprint``, if it has one)
    before it is built: its networks (weights, targets, gradients and Adam's moments), then those
    with one update at the batch size, against the memory available. Returns the footprint.

    Raises:
        ConfigError: one line naming the key (``agent.n_step``, ``agent.hidden_sizes``,
            ``agent.batch_size``, IQN's ``n_tau`` and ``n_tau_prime``), the estimate and the limit
            (with ``enforce``).
    """
    found = bounded_footprint(spec, spaces, enforce)
    if found is None:
        return None
    name, size = found
    memory(
        size.networks_setting,
        f"{name} (its networks' weights, targets, gradients and Adam's moments)",
        size.networks,
        enforce,
    )
    memory(
        size.update_setting,
        f"one {name} update at this size (its activations and their gradients, with the"
        f" {size_text(size.networks)} of networks)",
        size.networks + size.update,
        enforce,
    )
    return size


def check_agent_weights(
    spec: dict[str, Any], spaces: tuple[gym.Space, gym.Space], enforce: bool
) -> None:
    """Bound what building the agent ``spec`` describes to act allocates, before it is built: its
    networks' weights (the online ones and their targets; Adam's moments come with the first
    update, which acting never makes), against the memory available.

    Raises:
        ConfigError: one line naming the key (``agent.n_step``, ``agent.hidden_sizes``), the
            estimate and the limit (with ``enforce``).
    """
    found = bounded_footprint(spec, spaces, enforce)
    if found is not None:
        name, size = found
        memory(
            size.networks_setting,
            f"{name}'s networks (their weights and targets, what building it allocates)",
            size.weights,
            enforce,
        )
