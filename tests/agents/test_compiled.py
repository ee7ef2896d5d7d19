"""``agent.compile`` (agents/compiled.py): the same update as eager, torch's dynamo imported only by
an agent that updates."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.dqn import DQN
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


def test_an_agent_that_only_acts_never_imports_torch_dynamo():
    # actors and the evaluator build their agent from the learner's config, compile=true included
    code = (
        "import sys, numpy as np, gymnasium as gym\n"
        "from border_py.agents.dqn import DQN\n"
        "agent = DQN(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), hidden_sizes=[8],"
        " compile=True)\n"
        "agent.act(np.zeros((3, 4), np.float32), explore=True)\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
