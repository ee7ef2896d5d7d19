"""A greedy policy module (:mod:`border_py.deploy.graph`) as plain data for the numpy export:
``network.json``'s layer list and ``weights.npz``'s arrays, which ``policy.py``
(:mod:`border_py.deploy.numpy_policy`) runs.

The layers are those of :mod:`border_py.agents.layers` (``input``, ``conv``, ``relu``,
``flatten``, ``linear``, ``dueling``), which every network border's agents build is made of, and a
recurrent step's one-layer LSTM or GRU core (its weights in PyTorch's gate order, which
``policy.py``'s ``core_step`` runs); any other module is refused in one line.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from torch import nn

from border_py.agents.layers import Layer, NotALayer, network_layers
from border_py.deploy.graph import GreedyGaussian, GreedyQ, GreedyQuantile
from border_py.deploy.recurrent_graph import RecurrentStep
from border_py.errors import ConfigError

__all__ = ["numpy_network"]

Arrays = dict[str, np.ndarray]
# network.json's names of a one-layer LSTM's or GRU's weights -> torch's
CORE_WEIGHTS = {"w_ih": "weight_ih", "w_hh": "weight_hh", "b_ih": "bias_ih", "b_hh": "bias_hh"}


def _array(arrays: Arrays, name: str, value: Any) -> str:
    arrays[name] = value.detach().cpu().numpy().astype(np.float32)
    return name


def layers(module: nn.Module, name: str, arrays: Arrays) -> list[dict[str, Any]]:
    """``module``'s layers in order (:func:`~border_py.agents.layers.network_layers`, named
    after its state-dict keys under ``name``) as ``network.json`` lists them, their arrays added
    to ``arrays``.

    Raises:
        ConfigError: a module the numpy export cannot run (one line naming it).
    """
    try:
        found = network_layers(module, name)
    except NotALayer as exc:
        raise ConfigError(
            f"{exc}, which the numpy export cannot run (it runs linear, ReLU, flatten, dueling"
            " and unpadded square-stride conv layers); use --format onnx or torchscript"
        ) from None
    return [_entry(layer, arrays) for layer in found]


def _entry(layer: Layer, arrays: Arrays) -> dict[str, Any]:
    """``layer`` as ``network.json`` lists it (see :func:`policy.run`), its arrays added."""
    if layer.op == "input":
        return {"op": "input", "flatten": layer.flatten, "scale": layer.scale}
    if layer.op in ("linear", "conv"):
        entry: dict[str, Any] = {
            "op": layer.op,
            "weight": _array(arrays, f"{layer.name}.weight", layer.weight),
            "bias": _array(arrays, f"{layer.name}.bias", layer.bias),
        }
        if isinstance(layer.module, nn.Conv2d):
            entry["stride"] = int(layer.module.stride[0])
        return entry
    if layer.op == "dueling":
        value = [_entry(sub, arrays) for sub in layer.value]
        return {
            "op": "dueling",
            "value": value,
            "advantage": [_entry(sub, arrays) for sub in layer.advantage],
        }
    return {"op": layer.op}  # relu, flatten


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
    elif isinstance(module, RecurrentStep):
        network = recurrent_network(module, arrays)
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


def recurrent_network(step: RecurrentStep, arrays: Arrays) -> dict[str, Any]:
    """``network.json``'s content for a recurrent step: the torso's and the head's layers and
    the core's weights (one layer of ``nn.LSTM`` or ``nn.GRU``, PyTorch's gate order)."""
    core = step.core
    if not isinstance(core, nn.LSTM | nn.GRU) or core.num_layers != 1 or core.bidirectional:
        raise ConfigError(f"{core}: the numpy export runs one layer of LSTM or GRU only")
    return {
        "kind": "recurrent",
        "torso": layers(step.torso, "torso", arrays),
        "core": {
            "type": "lstm" if isinstance(core, nn.LSTM) else "gru",
            **{
                name: _array(arrays, f"core.{torch_name}_l0", getattr(core, f"{torch_name}_l0"))
                for name, torch_name in CORE_WEIGHTS.items()
            },
        },
        "hidden": int(core.hidden_size),
        "n_actions": step.n_actions,
        "prev_reward": step.prev_reward,
        "head": layers(step.head, "head", arrays),
    }
