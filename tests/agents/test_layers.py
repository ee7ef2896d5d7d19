"""agents/layers.py: the one walk of border's networks that the fast acting paths
(agents/inference.py) and the numpy export (deploy/numpy_network.py) both read: every network
the agents build is described whole, by its state-dict keys, and a module it does not describe (a
subclass of a layer included, whose forward may differ) is taken apart by neither."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from border_py.agents.dqn import DQN
from border_py.agents.inference import ConvInference, MLPInference
from border_py.agents.iqn import IQN
from border_py.agents.layers import Layer, NotALayer, network_layers
from border_py.agents.networks import VectorInput
from border_py.agents.sac import SAC
from border_py.deploy.graph import GreedyQ
from border_py.deploy.numpy_network import numpy_network
from border_py.errors import ConfigError

VECTOR = gym.spaces.Box(-1, 1, (5,), np.float32)
FRAMES = gym.spaces.Box(0, 255, (2, 40, 38), np.uint8)
GRID = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)
FOUR = gym.spaces.Discrete(4)
BOUNDED = gym.spaces.Box(-1, 1, (2,), np.float32)


def _networks() -> dict[str, nn.Module]:
    """Every kind of network border's agents build."""
    dqn = {
        "mlp": DQN(VECTOR, FOUR, hidden_sizes=[8, 8]).q,
        "mlp-dueling": DQN(VECTOR, FOUR, hidden_sizes=[8, 8], dueling=True).q,
        "nature-dueling": DQN(FRAMES, FOUR, hidden_sizes=[8], dueling=True).q,
        "minatar": DQN(GRID, FOUR, hidden_sizes=[8]).q,
    }
    z = IQN(FRAMES, FOUR, hidden_sizes=[8, 8], n_cos=4).z
    return {**dqn, "iqn-psi": z.psi, "iqn-phi": z.phi, "iqn-f": z.f} | {
        "sac-body": SAC(VECTOR, BOUNDED, hidden_sizes=[8]).policy.body
    }


def _parameter_names(layers: list[Layer]) -> list[str]:
    names = []
    for layer in layers:
        if layer.op in ("linear", "conv"):
            names += [f"{layer.name}.weight", f"{layer.name}.bias"]
        names += _parameter_names([*layer.value, *layer.advantage])
    return names


@pytest.mark.parametrize("kind", list(_networks()))
def test_every_network_of_the_agents_is_described_whole_by_its_state_dict_keys(kind):
    net = _networks()[kind]
    layers = network_layers(net, "")
    assert layers[0].op in ("input", "linear")  # IQN's embedding and head start with a Linear
    assert sorted(_parameter_names(layers)) == sorted(net.state_dict())
    for name in _parameter_names(layers):
        assert torch.equal(net.get_parameter(name), net.state_dict()[name])


def test_the_fast_paths_take_what_the_walk_describes():
    nets = _networks()
    assert [k for k, n in nets.items() if MLPInference.of(n)] == ["mlp", "sac-body"]
    assert [k for k, n in nets.items() if ConvInference.of(n)] == ["nature-dueling", "minatar"]


class Doubled(nn.Linear):
    """A Linear subclass whose forward is not a Linear's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(x)


@pytest.mark.parametrize("odd", [Doubled(4, 2), nn.Linear(4, 2, bias=False), nn.Tanh()])
def test_a_module_the_walk_does_not_describe_is_taken_apart_by_neither(odd):
    net = nn.Sequential(VectorInput(), nn.Linear(4, 4), nn.ReLU(), odd)
    with pytest.raises(NotALayer, match=r"^3: a \w+ layer$"):
        network_layers(net, "")
    assert MLPInference.of(net) is None
    with pytest.raises(ConfigError, match=r"^q\.3: a \w+ layer, which the numpy export cannot run"):
        numpy_network(GreedyQ(net), gym.spaces.Box(-1, 1, (4,), np.float32))
