"""border's networks read as a list of layers: the one walk that acting without module dispatch
(:mod:`border_py.agents.inference`) and the numpy export (:mod:`border_py.deploy.numpy_network`)
both take a network apart by.

The layers, in the order the network runs them:

- ``input``: the observations as float32 times ``scale``, flattened to (B, features)
  (:class:`~border_py.agents.networks.VectorInput`, an MLP's) or kept (B, C, H, W) (the
  :class:`~border_py.agents.networks.NatureCNN` and
  :class:`~border_py.agents.networks.MinAtarCNN` torsos, whose convolutions follow);
- ``conv``: a biased, unpadded, undilated, ungrouped ``Conv2d`` with a square stride;
- ``relu``; ``flatten`` (every axis but the batch's); ``linear``: a biased ``Linear``;
- ``dueling``: a :class:`~border_py.agents.networks.DuelingHead`, its value and advantage streams
  layers of their own (``Q = V + A - mean_a A``).

``nn.Sequential`` containers are read through. Every network border's agents build is made of
these (MLPs, the Nature and MinAtar CNNs, dueling heads, IQN's torso, embedding and head, SAC's
policy body); any other module, a subclass of one of these included (its ``forward`` may differ),
is :class:`NotALayer`.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from border_py.agents.networks import DuelingHead, MinAtarCNN, NatureCNN, VectorInput

__all__ = ["Layer", "NotALayer", "network_layers"]


@dataclass(frozen=True)
class Layer:
    """One layer of a network (see the module docstring for the kinds).

    Attributes:
        op: ``input``, ``conv``, ``relu``, ``flatten``, ``linear`` or ``dueling``.
        name: where the layer is in the network's state dict (a ``linear`` or ``conv`` layer's
            parameters are ``<name>.weight`` and ``<name>.bias``).
        module: the module the layer was read from (an ``input``'s: the ``VectorInput`` or the
            CNN torso).
        scale: an ``input``'s scale.
        flatten: an ``input`` that flattens the observations.
        value: a ``dueling`` layer's value stream.
        advantage: a ``dueling`` layer's advantage stream.
    """

    op: str
    name: str
    module: nn.Module
    scale: float = 1.0
    flatten: bool = False
    value: tuple[Layer, ...] = ()
    advantage: tuple[Layer, ...] = ()

    @property
    def weight(self) -> nn.Parameter:
        """A ``linear`` or ``conv`` layer's weight."""
        weight = self.module.weight
        assert isinstance(weight, nn.Parameter)
        return weight

    @property
    def bias(self) -> nn.Parameter:
        """A ``linear`` or ``conv`` layer's bias (every such layer has one)."""
        bias = self.module.bias
        assert isinstance(bias, nn.Parameter)
        return bias


class NotALayer(ValueError):
    """A module that is none of the layers border's networks are made of.

    Attributes:
        name: where it is in the network's state dict ("": the network walked itself).
        module: the module.
    """

    def __init__(self, name: str, module: nn.Module) -> None:
        super().__init__(f"{name or 'the network'}: a {type(module).__name__} layer")
        self.name, self.module = name, module


# the modules read: these classes exactly (a subclass's forward may compute something else)
KINDS: tuple[type[nn.Module], ...] = (nn.Sequential, VectorInput, NatureCNN, MinAtarCNN)
KINDS += (DuelingHead, nn.Linear, nn.ReLU, nn.Flatten, nn.Conv2d)


def network_layers(module: nn.Module, name: str) -> list[Layer]:
    """``module``'s layers in order, named after its state-dict keys under ``name`` (""
    for the keys of ``module``'s own state dict).

    Raises:
        NotALayer: the first module that is none of the layers.
    """
    if type(module) not in KINDS:
        raise NotALayer(name, module)
    if isinstance(module, nn.Sequential):
        return [
            layer
            for i, child in enumerate(module)
            for layer in network_layers(child, _key(name, i))
        ]
    if isinstance(module, VectorInput):
        return [Layer("input", name, module, scale=float(module.scale), flatten=True)]
    if isinstance(module, NatureCNN | MinAtarCNN):
        start = Layer("input", name, module, scale=float(module.scale))
        return [start, *network_layers(module.conv, _key(name, "conv"))]
    if isinstance(module, nn.Linear) and module.bias is not None:
        return [Layer("linear", name, module)]
    if isinstance(module, nn.ReLU):
        return [Layer("relu", name, module)]
    if isinstance(module, nn.Flatten) and module.start_dim == 1 and module.end_dim == -1:
        return [Layer("flatten", name, module)]
    if isinstance(module, nn.Conv2d) and _plain_conv(module):
        return [Layer("conv", name, module)]
    if isinstance(module, DuelingHead):
        value = tuple(network_layers(module.value, _key(name, "value")))
        advantage = tuple(network_layers(module.advantage, _key(name, "advantage")))
        return [Layer("dueling", name, module, value=value, advantage=advantage)]
    raise NotALayer(name, module)


def _key(name: str, part: object) -> str:
    """The state-dict key of a child ``part`` of the module at ``name`` ("": the network)."""
    return f"{name}.{part}" if name else str(part)


def _plain_conv(conv: nn.Conv2d) -> bool:
    """Whether ``conv`` is biased, unpadded, undilated and ungrouped, with a square stride."""
    return (
        conv.bias is not None
        and conv.padding in ((0, 0), "valid")
        and conv.dilation == (1, 1)
        and conv.groups == 1
        and conv.stride[0] == conv.stride[1]
        and conv.padding_mode == "zeros"
    )
