"""agents/networks.py and agents/batch.py: uint8 observations that are not images (e.g. the
128-byte Atari RAM of ``ALE/Pong-ram-v5``) stay uint8 until the network, which scales them by 1/255
as it does pixels; every agent acts and learns on them. The weights published to actors are a CPU
copy of every tensor (on CUDA: one asynchronous copy per dtype)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from border_py.agents.batch import TensorBatch
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN
from border_py.agents.networks import (
    MinAtarCNN,
    NatureCNN,
    VectorInput,
    cpu_weights,
    input_scale,
    q_network,
)
from border_py.agents.sac import SAC
from border_py.errors import ConfigError
from border_py.transitions import Transitions

RAM = gym.spaces.Box(0, 255, (128,), np.uint8)
SIX = gym.spaces.Discrete(6)


def _ram_batch(n: int = 8, continuous: bool = False) -> Transitions:
    rng = np.random.default_rng(0)
    action = rng.uniform(-1, 1, (n, 2)).astype(np.float32) if continuous else rng.integers(0, 6, n)
    return Transitions(
        rng.integers(0, 256, (n, 128), dtype=np.uint8),
        action,
        rng.normal(size=n).astype(np.float32),
        rng.integers(0, 256, (n, 128), dtype=np.uint8),
        np.full(n, 0.99, np.float32),
        weight=np.linspace(0.5, 1.0, n).astype(np.float32),
    )


def test_the_batch_keeps_uint8_observations_and_converts_the_rest_once():
    batch = _ram_batch()
    b = TensorBatch.of(batch, torch.device("cpu"), discrete=True)
    assert b.obs.dtype == torch.uint8 and b.next_obs.dtype == torch.uint8
    assert b.action.dtype == torch.int64 and b.reward.dtype == torch.float32
    assert b.discount.dtype == torch.float32 and b.weight is not None
    floats = Transitions(*(np.asarray(a, np.float64) for a in batch.arrays().values()))
    c = TensorBatch.of(floats, torch.device("cpu"), discrete=False)
    assert c.obs.dtype == torch.float32 and c.action.dtype == torch.float32 and c.weight is None
    per_sample = torch.arange(8.0)
    assert float(b.weighted_mean(per_sample)) == float((per_sample * b.weight).mean())
    assert float(c.weighted_mean(per_sample)) == 3.5


def _unscaled(encoder_net: nn.Sequential) -> nn.Sequential:
    """The layers after the network's input module."""
    return nn.Sequential(*list(encoder_net)[1:])


def test_uint8_vectors_are_scaled_in_every_mlp_torso():
    obs = _ram_batch().obs
    scaled = torch.tensor(obs, dtype=torch.float32) / 255
    dqn = DQN(RAM, SIX, hidden_sizes=[16])
    assert isinstance(dqn.q[0], VectorInput) and dqn.q[0].scale == 1 / 255
    with torch.no_grad():
        torch.testing.assert_close(dqn.q(torch.tensor(obs)), _unscaled(dqn.q)(scaled))
    iqn = IQN(RAM, SIX, hidden_sizes=[16, 16], n_tau=4, n_tau_prime=4, k=4)
    assert isinstance(iqn.z.psi[0], VectorInput) and iqn.z.psi[0].scale == 1 / 255
    sac = SAC(RAM, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), hidden_sizes=[16])
    with torch.no_grad():
        torch.testing.assert_close(
            sac.policy.body(torch.tensor(obs)), _unscaled(sac.policy.body)(scaled)
        )
        action = torch.zeros(len(obs), 2)
        q_uint8 = sac.critics(torch.tensor(obs), action)
        sac.critics.obs_input.scale = 1.0  # the same critics on pre-scaled floats
        torch.testing.assert_close(q_uint8, sac.critics(scaled, action))
    # float observations are not scaled
    assert DQN(gym.spaces.Box(0.0, 255.0, (4,), np.float32), SIX).q[0].scale == 1.0


def test_every_agent_acts_and_learns_on_uint8_vectors():
    for agent, continuous in (
        (DQN(RAM, SIX, hidden_sizes=[16]), False),
        (IQN(RAM, SIX, hidden_sizes=[16, 16], n_tau=4, n_tau_prime=4, k=4), False),
        (SAC(RAM, gym.spaces.Box(-1.0, 1.0, (2,), np.float32), hidden_sizes=[16]), True),
    ):
        batch = _ram_batch(continuous=continuous)
        for explore in (False, True):
            assert len(agent.act(batch.obs, explore)) == 8
        metrics = agent.update(batch)
        assert all(np.isfinite(float(v)) for k, v in metrics.items() if k != "td_error")


@pytest.mark.parametrize(
    "device",
    ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)],
)
def test_published_weights_are_an_independent_cpu_copy_of_every_tensor(device):
    module = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3), torch.nn.BatchNorm2d(8)).to(device)
    published = cpu_weights(module)
    state = module.state_dict()
    assert list(published) == list(state)  # int64 num_batches_tracked included, in order
    for key, value in state.items():
        assert published[key].device.type == "cpu" and published[key].dtype == value.dtype
        assert torch.equal(published[key], value.cpu())
    with torch.no_grad():
        module[0].weight.add_(1.0)
    assert not torch.equal(published["0.weight"], module[0].weight.cpu())  # a copy, not a view


GRID = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)  # MinAtar Breakout's channels-first grid


def test_the_minatar_torso_fits_small_grids_and_auto_picks_it_below_36x36():
    net = q_network(GRID, 3, [128])  # network=auto
    assert isinstance(net[0], MinAtarCNN) and net[0].scale == 1.0  # 0/1 grids taken as they are
    assert net[1].in_features == 16 * 8 * 8  # 16 3x3 filters, stride 1: 10 -> 8
    grids = torch.randint(0, 2, (5, 4, 10, 10), dtype=torch.uint8)
    assert net(grids).shape == (5, 3)
    assert net[0](grids).shape == (5, 1024)
    torch.testing.assert_close(net[0](grids), net[0].conv(grids.float()))
    for size, torso in [(35, MinAtarCNN), (36, NatureCNN)]:
        frames = gym.spaces.Box(0, 255, (2, size, size), np.uint8)
        assert isinstance(q_network(frames, 3, [8])[0], torso)
    odd = q_network(gym.spaces.Box(0, 1, (7, 12, 5), np.uint8), 3, [8], network="minatar")
    assert odd[1].in_features == 16 * 10 * 3  # any frame of at least 3x3, not only squares


def test_torso_choices_and_misfits_are_one_line():
    with pytest.raises(ConfigError, match=r"^network='cnn': observations of shape \(4, 10, 10\)"):
        q_network(GRID, 3, [8], network="cnn")
    with pytest.raises(
        ConfigError, match=r"too small for the 'minatar' torso \(frames of at least"
    ):
        q_network(gym.spaces.Box(0, 1, (4, 2, 9), np.uint8), 3, [8], network="minatar")
    with pytest.raises(ConfigError, match=r"'minatar' only for \(C, H, W\) observations"):
        q_network(gym.spaces.Box(0, 1, (100,), np.uint8), 3, [8], network="minatar")
    with pytest.raises(
        ConfigError, match=r"network='conv': must be 'auto', 'mlp', 'cnn', 'minatar'"
    ):
        q_network(GRID, 3, [8], network="conv")
    assert isinstance(q_network(GRID, 3, [8], network="mlp")[0], VectorInput)


def test_uint8_inputs_are_scaled_by_the_spaces_upper_bound():
    assert input_scale(GRID) == 1.0
    assert input_scale(gym.spaces.Box(0, 15, (3,), np.uint8)) == 1 / 15
    assert input_scale(gym.spaces.Box(0, 255, (3,), np.uint8)) == 1 / 255
    assert input_scale(gym.spaces.Box(0, 1, (3,), np.float32)) == 1.0
