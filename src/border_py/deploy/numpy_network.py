"""A greedy policy module (:mod:`border_py.deploy.graph`) as plain data for the numpy export:
``network.json``'s layer list and ``weights.npz``'s arrays, which ``policy.py``
(:mod:`border_py.deploy.numpy_policy`) runs.

Layers: ``input`` (float32, flattened or not, scaled), ``conv`` (valid, square stride),
``relu``, ``flatten``, ``linear`` and ``dueling`` (a value and an advantage stream). Every network
border's agents build is made of these (MLPs, the Nature and MinAtar CNNs, dueling heads, IQN's
embedding); any other module is refused in one line.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from border_py.agents.networks import DuelingHead, MinAtarCNN, NatureCNN, VectorInput
from border_py.deploy.graph import GreedyGaussian, GreedyQ, GreedyQuantile
from border_py.errors import ConfigError

Arrays = dict[str, np.ndarray]


def _array(arrays: Arrays, name: str, value: Any) -> str:
    arrays[name] = value.detach().cpu().numpy().astype(np.float32)
    return name


def layers(module: nn.Module, name: str, arrays: Arrays) -> list[dict[str, Any]]:
    """``module``'s layers in order (named after its state-dict keys under ``name``), their
    arrays added to ``arrays``.

    Raises:
        ConfigError: a module the numpy export cannot run (one line naming it).
    """
    if isinstance(module, nn.Sequential):
        return [op for i, child in enumerate(module) for op in layers(child, f"{name}.{i}", arrays)]
    if isinstance(module, VectorInput):
        return [{"op": "input", "flatten": True, "scale": float(module.scale)}]
    if isinstance(module, NatureCNN | MinAtarCNN):
        start = [{"op": "input", "flatten": False, "scale": float(module.scale)}]
        return start + layers(module.conv, f"{name}.conv", arrays)
    if isinstance(module, nn.Linear) and module.bias is not None:
        weight = _array(arrays, f"{name}.weight", module.weight)
        return [
            {"op": "linear", "weight": weight, "bias": _array(arrays, f"{name}.bias", module.bias)}
        ]
    if isinstance(module, nn.ReLU):
        return [{"op": "relu"}]
    if isinstance(module, nn.Flatten) and module.start_dim == 1 and module.end_dim == -1:
        return [{"op": "flatten"}]
    if isinstance(module, nn.Conv2d) and _plain_conv(module):
        return [
            {
                "op": "conv",
                "weight": _array(arrays, f"{name}.weight", module.weight),
                "bias": _array(arrays, f"{name}.bias", module.bias),
                "stride": int(module.stride[0]),
            }
        ]
    if isinstance(module, DuelingHead):
        value = layers(module.value, f"{name}.value", arrays)
        return [
            {
                "op": "dueling",
                "value": value,
                "advantage": layers(module.advantage, f"{name}.advantage", arrays),
            }
        ]
    raise ConfigError(
        f"{name}: a {type(module).__name__} layer, which the numpy export cannot run (it runs"
        " linear, ReLU, flatten, dueling and unpadded square-stride conv layers); use"
        " --format onnx or torchscript"
    )


def _plain_conv(conv: nn.Conv2d) -> bool:
    """Whether ``conv`` is one :func:`policy.conv2d` computes: biased, unpadded, undilated,
    ungrouped, with a square stride."""
    return (
        conv.bias is not None
        and conv.padding in ((0, 0), "valid")
        and conv.dilation == (1, 1)
        and conv.groups == 1
        and conv.stride[0] == conv.stride[1]
        and conv.padding_mode == "zeros"
    )


def numpy_network(module: nn.Module, observation_space: gym.Space) -> tuple[dict[str, Any], Arrays]:
    """``(network.json's content, weights.npz's arrays)`` of a greedy module.

    Raises:
        ConfigError: a layer the numpy export cannot run.
    """
    arrays: Arrays = {}
    observation = {
        "shape": list(observation_space.shape or ()),
        "dtype": np.dtype(observation_space.dtype).name,
    }
    network: dict[str, Any]
    if isinstance(module, GreedyQ):
        network = {"kind": "q", "layers": layers(module.q, "q", arrays)}
    elif isinstance(module, GreedyQuantile):
        z = module.z
        network = {
            "kind": "quantile",
            "psi": layers(z.psi, "z.psi", arrays),
            "phi": layers(z.phi, "z.phi", arrays),
            "f": layers(z.f, "z.f", arrays),
            "taus": _array(arrays, "taus", module.taus.reshape(-1)),
            "i_pi": _array(arrays, "z.i_pi", z.i_pi),
        }
    elif isinstance(module, GreedyGaussian):
        network = {
            "kind": "gaussian",
            "layers": layers(module.policy.body, "policy.body", arrays),
            "low": _array(arrays, "low", module.low),
            "high": _array(arrays, "high", module.high),
            "action_shape": list(module.shape),
        }
    else:
        raise ConfigError(f"{type(module).__name__}: not a greedy policy module of border's")
    return {"observation": observation, **network}, arrays
