"""Acting in bfloat16 on a CUDA device that supports it (``pytest -m gpu``; skipped elsewhere): the
conv path keeps the module's values to bfloat16's rounding and its greedy actions wherever the two
best values are apart."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.dqn import DQN
from border_py.agents.inference import ConvInference

from ..agents.test_inference import _assert_bf16_close, _frames

pytestmark = pytest.mark.gpu

ATARI = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
MINATAR = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
SIX = gym.spaces.Discrete(6)
BF16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()


@pytest.mark.skipif(not BF16, reason="needs a CUDA device that supports bfloat16")
@pytest.mark.parametrize("space", [ATARI, MINATAR], ids=["nature_cnn", "minatar"])
@pytest.mark.parametrize("dueling", [False, True])
def test_bfloat16_acting_on_cuda_keeps_the_values_and_clear_greedy_actions(space, dueling):
    agent = DQN(space, SIX, "cuda", hidden_sizes=[64], dueling=dueling)
    obs = _frames(space, 64, seed=1)
    with torch.no_grad():
        reference = agent.q(torch.from_numpy(obs).cuda()).cpu().numpy()
    agent.set_acting_dtype("bfloat16")
    assert isinstance(agent.fast_q, ConvInference) and agent.fast_q.dtype == torch.bfloat16
    _assert_bf16_close(agent.q_values(obs), reference)
    assert agent.fast_q.device.type == "cuda"  # the weights stayed on the device
    np.testing.assert_array_equal(agent.act(obs, False), agent.q_values(obs).argmax(axis=1))
