"""agents/layers.py: the one walk of border's networks that the fast acting paths
(agents/inference.py) and the numpy export (deploy/numpy_network.py) both read. Every network
shape the agents build is walked into its layers in order, with their kinds, names and shapes;
the layers alone compute what the network does (a numpy forward built from them equals torch's);
and a module the walk does not describe (a subclass of a layer included, whose forward may
differ) is refused in one line naming where it is, and taken apart by neither reader."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from border_py.agents.dqn import DQN
from border_py.agents.inference import ConvInference, MLPInference
from border_py.agents.iqn import IQN
from border_py.agents.layers import Layer, NotALayer, network_layers
from border_py.agents.networks import DuelingHead, NatureCNN, QuantileNetwork, VectorInput
from border_py.agents.sac import SAC
from border_py.deploy.graph import GreedyQ
from border_py.deploy.numpy_network import numpy_network
from border_py.errors import ConfigError

VECTOR = gym.spaces.Box(-1, 1, (5,), np.float32)
RAM = gym.spaces.Box(0, 255, (6,), np.uint8)  # a uint8 vector (Atari RAM): scaled by 1/255
FRAMES = gym.spaces.Box(0, 255, (2, 40, 38), np.uint8)  # the Nature CNN's (36x36 and up)
GRID = gym.spaces.Box(0, 1, (4, 10, 10), np.uint8)  # MinAtar's 0/1 grids: the MinAtar CNN's
FOUR = gym.spaces.Discrete(4)
BOUNDED = gym.spaces.Box(-1, 1, (2,), np.float32)


def _iqn() -> QuantileNetwork:
    return IQN(FRAMES, FOUR, hidden_sizes=[8, 8], n_cos=4).z


def _networks() -> dict[str, nn.Module]:
    """Every shape of network border's agents build (the walk reads IQN's three parts)."""
    z = _iqn()
    return {
        "mlp": DQN(VECTOR, FOUR, hidden_sizes=[8, 8]).q,
        "mlp-uint8": DQN(RAM, FOUR, hidden_sizes=[8]).q,
        "mlp-dueling": DQN(VECTOR, FOUR, hidden_sizes=[8, 8], dueling=True).q,
        "nature": DQN(FRAMES, FOUR, hidden_sizes=[8]).q,
        "nature-dueling": DQN(FRAMES, FOUR, hidden_sizes=[8], dueling=True).q,
        "minatar": DQN(GRID, FOUR, hidden_sizes=[8]).q,
        "minatar-dueling": DQN(GRID, FOUR, hidden_sizes=[8], dueling=True).q,
        "iqn-psi": z.psi,
        "iqn-phi": z.phi,
        "iqn-f": z.f,
        "sac-body": SAC(VECTOR, BOUNDED, hidden_sizes=[8]).policy.body,
    }


# -- the layers in order: kinds, state-dict names, shapes ---------------------------------------


def _described(layers: Sequence[Layer]) -> list[tuple[Any, ...]]:
    """``layers`` as plain tuples: (op, name) and what the op has (an input's scale and whether
    it flattens, a linear's weight shape, a conv's and its stride, a dueling head's streams)."""
    out: list[tuple[Any, ...]] = []
    for layer in layers:
        if layer.op == "input":
            out.append(("input", layer.name, round(layer.scale, 6), layer.flatten))
        elif layer.op == "linear":
            out.append(("linear", layer.name, tuple(layer.weight.shape)))
        elif layer.op == "conv":
            stride = layer.module.stride
            out.append(("conv", layer.name, tuple(layer.weight.shape), stride))
        elif layer.op == "dueling":
            value, advantage = _described(layer.value), _described(layer.advantage)
            out.append(("dueling", layer.name, value, advantage))
        else:
            out.append((layer.op, layer.name))
    return out


def _dense(prefix: str, start: int, widths: Sequence[int]) -> list[tuple[Any, ...]]:
    """Linear layers ``widths[0] -> widths[1] -> ...`` named ``prefix<start>``, ``...``, with a
    ReLU between each two."""
    out: list[tuple[Any, ...]] = []
    for i, (fan_in, fan_out) in enumerate(pairwise(widths)):
        if i:
            out.append(("relu", f"{prefix}{start + 2 * i - 1}"))
        out.append(("linear", f"{prefix}{start + 2 * i}", (fan_out, fan_in)))
    return out


NATURE_TORSO = [
    ("input", "0", round(1 / 255, 6), False),
    ("conv", "0.conv.0", (32, 2, 8, 8), (4, 4)),
    ("relu", "0.conv.1"),
    ("conv", "0.conv.2", (64, 32, 4, 4), (2, 2)),
    ("relu", "0.conv.3"),
    ("conv", "0.conv.4", (64, 64, 3, 3), (1, 1)),
    ("relu", "0.conv.5"),
    ("flatten", "0.conv.6"),
]  # 40x38 frames: 9x8 after the first conv, 3x3 after the second, 1x1 after the third
MINATAR_TORSO = [
    ("input", "0", 1.0, False),
    ("conv", "0.conv.0", (16, 4, 3, 3), (1, 1)),
    ("relu", "0.conv.1"),
    ("flatten", "0.conv.2"),
]  # 16 x 8 x 8 = 1024 features


def _dueling(name: str, width: int) -> tuple[Any, ...]:
    """A dueling head over ``width`` features, one 8-unit layer per stream, 4 actions."""
    value = _dense(f"{name}.value.", 0, [width, 8, 1])
    return ("dueling", name, value, _dense(f"{name}.advantage.", 0, [width, 8, 4]))


EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    "mlp": [("input", "0", 1.0, True), *_dense("", 1, [5, 8, 8, 4])],
    "mlp-uint8": [("input", "0", round(1 / 255, 6), True), *_dense("", 1, [6, 8, 4])],
    "mlp-dueling": [
        ("input", "0", 1.0, True),
        ("linear", "1", (8, 5)),
        ("relu", "2"),
        _dueling("3", 8),
    ],
    "nature": [*NATURE_TORSO, ("linear", "1", (8, 64)), ("relu", "2"), ("linear", "3", (4, 8))],
    "nature-dueling": [*NATURE_TORSO, _dueling("1", 64)],
    "minatar": [*MINATAR_TORSO, ("linear", "1", (8, 1024)), ("relu", "2"), ("linear", "3", (4, 8))],
    "minatar-dueling": [*MINATAR_TORSO, _dueling("1", 1024)],
    "iqn-psi": [*NATURE_TORSO, ("linear", "1", (8, 64)), ("relu", "2")],
    "iqn-phi": [("linear", "0", (8, 4)), ("relu", "1")],
    "iqn-f": _dense("", 0, [8, 8, 4]),
    "sac-body": [("input", "0", 1.0, True), *_dense("", 1, [5, 8, 4])],  # mean and log_std
}


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_each_network_shape_is_walked_into_its_layers_in_order(kind):
    assert _described(network_layers(_networks()[kind], "")) == EXPECTED[kind]


def test_names_are_the_state_dict_keys_under_the_name_given():
    layers = network_layers(_networks()["nature-dueling"], "q")
    assert [layer.name for layer in layers[:2]] == ["q.0", "q.0.conv.0"]
    assert layers[-1].name == "q.1" and layers[-1].advantage[-1].name == "q.1.advantage.2"


def _parameter_names(layers: Sequence[Layer]) -> list[str]:
    names = []
    for layer in layers:
        if layer.op in ("linear", "conv"):
            names += [f"{layer.name}.weight", f"{layer.name}.bias"]
        names += _parameter_names([*layer.value, *layer.advantage])
    return names


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_every_network_of_the_agents_is_described_whole_by_its_state_dict_keys(kind):
    net = _networks()[kind]
    layers = network_layers(net, "")
    assert sorted(_parameter_names(layers)) == sorted(net.state_dict())
    for name in _parameter_names(layers):
        assert torch.equal(net.get_parameter(name), net.state_dict()[name])


# -- the layers compute what the network does --------------------------------------------------


def _conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """An unpadded convolution summed kernel offset by kernel offset: (B, C, H, W) -> (B, O, ...)."""
    _, _, kh, kw = weight.shape
    oh, ow = (x.shape[2] - kh) // stride + 1, (x.shape[3] - kw) // stride + 1
    out = np.broadcast_to(bias[None, :, None, None], (len(x), len(bias), oh, ow)).copy()
    for i in range(kh):
        for j in range(kw):
            window = x[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
            out += np.einsum("bchw,oc->bohw", window, weight[:, :, i, j])
    return out


def _array(param: torch.Tensor) -> np.ndarray:
    return param.detach().numpy()


def _input(layer: Layer, x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float32) * np.float32(layer.scale)
    return x.reshape(len(x), -1) if layer.flatten else x


def _dueling_forward(layer: Layer, x: np.ndarray) -> np.ndarray:
    value, advantage = numpy_forward(layer.value, x), numpy_forward(layer.advantage, x)
    return value + advantage - advantage.mean(axis=-1, keepdims=True)


STEPS: dict[str, Callable[[Layer, np.ndarray], np.ndarray]] = {
    "input": _input,
    "conv": lambda layer, x: _conv(
        x, _array(layer.weight), _array(layer.bias), layer.module.stride[0]
    ),
    "linear": lambda layer, x: x @ _array(layer.weight).T + _array(layer.bias),
    "relu": lambda layer, x: np.maximum(x, 0),
    "flatten": lambda layer, x: x.reshape(len(x), -1),
    "dueling": _dueling_forward,
}


def numpy_forward(layers: Sequence[Layer], x: np.ndarray) -> np.ndarray:
    """``x`` through ``layers`` with numpy, from what each layer says alone."""
    for layer in layers:
        x = STEPS[layer.op](layer, x)
    return x


def _inputs(kind: str, rng: np.random.Generator) -> np.ndarray:
    """A batch of 7 random inputs of what network ``kind`` takes."""
    space = {"mlp-uint8": RAM, "nature": FRAMES, "minatar": GRID, "iqn-psi": FRAMES}.get(
        kind.removesuffix("-dueling"), VECTOR
    )
    if kind == "iqn-phi":  # the cosines of the quantile levels
        return rng.uniform(-1, 1, (7, 4)).astype(np.float32)
    if kind == "iqn-f":  # features times the embedding: (B, N, width), Linear on the last axis
        return rng.normal(size=(7, 3, 8)).astype(np.float32)
    if space.dtype == np.uint8:
        high = int(space.high.max())
        return rng.integers(0, high + 1, (7, *space.shape), dtype=np.uint8)
    return rng.normal(size=(7, *space.shape)).astype(np.float32)


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_a_numpy_forward_built_from_the_walk_equals_torchs(kind):
    net = _networks()[kind]
    for param in net.parameters():  # weights of every sign and size, not only the init's
        torch.nn.init.normal_(
            param, std=0.5, generator=torch.Generator().manual_seed(param.numel())
        )
    x = _inputs(kind, np.random.default_rng(3))
    with torch.no_grad():
        want = net(torch.as_tensor(x)).numpy()
    got = numpy_forward(network_layers(net, ""), x)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_iqns_three_walked_parts_are_its_whole_network():
    z = _iqn()
    obs = _inputs("iqn-psi", np.random.default_rng(4))
    taus = torch.rand(7, 3, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        want = z(torch.as_tensor(obs), taus).numpy()
    cosines = np.cos(taus.numpy()[..., None] * z.i_pi.numpy())  # (B, N, n_cos)
    features = numpy_forward(network_layers(z.psi, ""), obs)  # (B, width)
    embedding = numpy_forward(network_layers(z.phi, ""), cosines)  # (B, N, width)
    got = numpy_forward(network_layers(z.f, ""), features[:, None, :] * embedding)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_fast_paths_take_what_the_walk_describes():
    nets = _networks()
    assert [k for k, n in nets.items() if MLPInference.of(n)] == ["mlp", "mlp-uint8", "sac-body"]
    convs = ["nature", "nature-dueling", "minatar", "minatar-dueling"]
    assert [k for k, n in nets.items() if ConvInference.of(n)] == convs


# -- a module the walk does not describe --------------------------------------------------------


class Doubled(nn.Linear):
    """A Linear subclass whose forward is not a Linear's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(x)


def _padded_nature() -> nn.Sequential:
    torso = NatureCNN(2)
    torso.conv[0] = nn.Conv2d(2, 32, kernel_size=8, stride=4, padding=1)
    return nn.Sequential(torso, nn.Linear(64, 4))


def _odd_stream() -> nn.Sequential:
    head = DuelingHead(4, [8], 2)
    head.value[1] = nn.Tanh()
    return nn.Sequential(VectorInput(), head)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: nn.Sequential(VectorInput(), nn.Linear(4, 4), Doubled(4, 2)),
            "2: a Doubled layer",
        ),
        (lambda: nn.Sequential(VectorInput(), nn.Linear(4, 2, bias=False)), "1: a Linear layer"),
        (lambda: nn.Sequential(VectorInput(), nn.Linear(4, 2), nn.Tanh()), "2: a Tanh layer"),
        (_padded_nature, "0.conv.0: a Conv2d layer"),
        (_odd_stream, "1.value.1: a Tanh layer"),
        (_iqn, "the network: a QuantileNetwork layer"),  # its parts are walked, not the whole
    ],
)
def test_a_module_the_walk_does_not_describe_is_refused_in_one_line(make, message):
    net = make()
    with pytest.raises(NotALayer) as refused:
        network_layers(net, "")
    assert str(refused.value) == message
    assert refused.value.module is net.get_submodule(refused.value.name)
    assert MLPInference.of(net) is None and ConvInference.of(net) is None


@pytest.mark.parametrize("odd", [Doubled(4, 2), nn.Linear(4, 2, bias=False), nn.Tanh()])
def test_the_numpy_export_refuses_it_naming_where_it_is(odd):
    net = nn.Sequential(VectorInput(), nn.Linear(4, 4), nn.ReLU(), odd)
    with pytest.raises(ConfigError, match=r"^q\.3: a \w+ layer, which the numpy export cannot run"):
        numpy_network(GreedyQ(net), gym.spaces.Box(-1, 1, (4,), np.float32))
