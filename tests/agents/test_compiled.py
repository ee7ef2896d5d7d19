"""``agent.compile`` (agents/compiled.py) and the capturable Adam (agents/optim.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.dqn import DQN
from border_py.agents.optim import Adam
from border_py.errors import ConfigError
from border_py.transitions import Transitions

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)


def batch(seed: int) -> Transitions:
    rng = np.random.default_rng(seed)
    return Transitions(
        obs=rng.standard_normal((32, 4)).astype(np.float32),
        action=rng.integers(0, 2, 32),
        reward=rng.standard_normal(32).astype(np.float32),
        next_obs=rng.standard_normal((32, 4)).astype(np.float32),
        discount=np.full(32, 0.99, np.float32),
    )


@pytest.mark.slow  # torch.compile takes about a minute here on first use
def test_a_compiled_dqn_update_equals_the_eager_one():
    keys = {"seed": 1, "hidden_sizes": [16], "batch_size": 32}
    eager = DQN(OBS, gym.spaces.Discrete(2), **keys)
    fast = DQN(OBS, gym.spaces.Discrete(2), compile=True, **keys)
    for step in range(3):
        want, got = eager.update(batch(step)), fast.update(batch(step))
        assert float(got["train/loss"]) == pytest.approx(float(want["train/loss"]), abs=1e-5)
    for p, q in zip(eager.q.parameters(), fast.q.parameters(), strict=True):
        torch.testing.assert_close(q, p, atol=1e-5, rtol=1e-5)


def test_compile_mode_is_checked():
    with pytest.raises(ConfigError, match="compile_mode"):
        DQN(OBS, gym.spaces.Discrete(2), compile_mode="fastest")


def test_capturable_adam_is_refused_on_cpu():
    # torch's capturable optimizers run on cuda, xpu and hpu only (checked here with torch 2.13)
    with pytest.raises(ValueError, match="capturable"):
        Adam([torch.zeros(3, requires_grad=True)], 1e-3, capturable=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="capturable Adam needs a GPU")
def test_capturable_adam_makes_the_fused_step():
    params = [torch.randn(64, 32, device="cuda", requires_grad=True) for _ in range(2)]
    twins = [p.detach().clone().requires_grad_(True) for p in params]
    fused = Adam(params, 1e-3, max_grad_norm=1.0)
    graph_safe = Adam(twins, 1e-3, max_grad_norm=1.0, capturable=True)
    for step in range(5):
        grads = [torch.randn_like(p) * (step + 1) for p in params]
        for p, q, g in zip(params, twins, grads, strict=True):
            p.grad, q.grad = g.clone(), g.clone()
        fused.step()
        graph_safe.step()
    for p, q in zip(params, twins, strict=True):
        torch.testing.assert_close(q, p, atol=1e-6, rtol=1e-6)
