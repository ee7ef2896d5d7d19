"""The agents on a CUDA device (``pytest -m gpu``; skipped without one): one update equals the
CPU's from the same weights, batch and random draws, and ``check_agent`` holds there (pinned
prefetch conversions, TD errors left on the device, a state loaded across seeds)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents import check_agent
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.agents.sac import SAC
from border_py.transitions import Transitions

from ..frame_env import make_pattern

pytestmark = pytest.mark.gpu

TOLERANCE = 1e-4  # relative, of the loss and of the parameter update, in full float32
ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
VECTOR, TWO, SIX = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), gym.spaces.Discrete(6)
PENDULUM = (gym.spaces.Box(-8, 8, (3,)), gym.spaces.Box(-2, 2, (1,)))


def _batch(obs_space: gym.spaces.Box, action_space: gym.Space, n: int = 32) -> Transitions:
    """``n`` random transitions of the spaces' shapes (the same for every call)."""
    rng = np.random.default_rng(3)
    shape = (n, *obs_space.shape)

    def obs() -> np.ndarray:
        if obs_space.dtype == np.uint8:
            return rng.integers(0, 256, shape, dtype=np.uint8)
        return rng.normal(size=shape).astype(np.float32)

    if isinstance(action_space, gym.spaces.Discrete):
        action = rng.integers(0, int(action_space.n), n)
    else:
        action = rng.uniform(-1, 1, (n, *action_space.shape)).astype(np.float32)
    reward = rng.normal(size=n).astype(np.float32)
    return Transitions(obs(), action, reward, obs(), np.full(n, 0.97, np.float32))


PARITY: dict[str, tuple[Callable[[str], Any], Transitions]] = {
    "dqn_mlp": (lambda d: DQN(VECTOR, TWO, d, hidden_sizes=[64, 64]), _batch(VECTOR, TWO)),
    "dqn_nature_cnn": (
        lambda d: DQN(ATARI, SIX, d, hidden_sizes=[512], dueling=True),
        _batch(ATARI, SIX),
    ),
    "iqn": (lambda d: IQN(VECTOR, TWO, d, hidden_sizes=[64]), _batch(VECTOR, TWO)),
    "sac": (lambda d: SAC(*PENDULUM, d, hidden_sizes=[64, 64]), _batch(*PENDULUM)),
}


def _learned(agent: Any) -> list[torch.Tensor]:
    """Every tensor the agent's update changes: its networks' parameters and SAC's log-alpha."""
    tensors = [
        p for m in vars(agent).values() if isinstance(m, torch.nn.Module) for p in m.parameters()
    ]
    return tensors + [t for t in vars(agent).values() if isinstance(t, torch.Tensor)]


def _same_draws(agent: Any, seed: int) -> None:
    """Make the update's random draws come from one CPU generator, whatever the device."""
    generator = torch.Generator().manual_seed(seed)
    device = agent.device
    if isinstance(agent, IQN):
        agent._sample_taus = lambda b, n: torch.rand(b, n, generator=generator).to(device)
    if isinstance(agent, SAC):
        agent.standard_normal = lambda shape, dtype: torch.randn(
            shape, generator=generator, dtype=dtype
        ).to(device)


def _one_update(make: Callable[[str], Any], batch: Transitions, device: str) -> tuple[float, list]:
    """The loss and the parameter update of one ``update(batch)`` of a fresh agent on ``device``."""
    agent = make(device)
    _same_draws(agent, 7)
    before = [t.detach().cpu().clone() for t in _learned(agent)]
    metrics = agent.update(batch)
    after = [t.detach().cpu() for t in _learned(agent)]
    loss = float(next(v for k, v in metrics.items() if "loss" in k))
    return loss, [a - b for a, b in zip(after, before, strict=True)]


@pytest.mark.parametrize("name", sorted(PARITY))
def test_one_update_on_cuda_equals_the_cpus(name, record_property):
    make, batch = PARITY[name]
    loss_cpu, step_cpu = _one_update(make, batch, "cpu")
    loss_cuda, step_cuda = _one_update(make, batch, "cuda")
    diff = sum(float((a - b).norm() ** 2) for a, b in zip(step_cpu, step_cuda, strict=True))
    norm = sum(float(a.norm() ** 2) for a in step_cpu)
    loss_rel = abs(loss_cpu - loss_cuda) / max(abs(loss_cpu), 1e-12)
    update_rel = (diff / max(norm, 1e-30)) ** 0.5
    record_property("loss_rel", loss_rel)  # benchmarks/gpu_check.py reports them
    record_property("update_rel", update_rel)
    assert loss_rel <= TOLERANCE and update_rel <= TOLERANCE, (loss_rel, update_rel)


SMALL = {"hidden_sizes": [32], "batch_size": 16}
CHECKED = {  # name -> (class, env, hparams)
    "dqn_mlp": (DQN, lambda: gym.make("CartPole-v1"), SMALL),
    "dqn_conv": (DQN, make_pattern, {**SMALL, "dueling": True}),
    "iqn": (IQN, lambda: gym.make("CartPole-v1"), {**SMALL, "n_tau": 8, "n_tau_prime": 8, "k": 8}),
    "sac": (SAC, lambda: gym.make("Pendulum-v1"), {**SMALL, "random_steps": 10}),
}


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_check_agent_holds_on_cuda(name):
    agent_class, make_env, hparams = CHECKED[name]
    checked = check_agent(agent_class, make_env(), hparams, device="cuda", tolerance=1e-5)
    assert "prefetch parity" in checked and "continue identically after save/load" in checked
