"""Acting without torch's per-call overhead: small MLPs with numpy, conv Q-networks functionally.

An actor calls its policy once per vector step on a handful of rows, where ``nn.Module`` dispatch
(``__call__``, hooks, ``Sequential`` iteration), autograd bookkeeping and torch's operator dispatch
cost more than the arithmetic. :class:`MLPInference` evaluates a plain MLP with numpy on views of
its weights on CPU (``x @ W.T + b``, then ReLU), and with torch's functional ops (``F.linear``,
``torch.relu``, no graph recorded) on another device. The views share storage with the
parameters, so they follow every in-place change (optimizer steps, ``load_state_dict``, which
copies into the parameters); parameters replaced or moved to other storage by a module-wide
operation are noticed at the next call and viewed anew.

Why numpy on CPU, measured (``benchmarks/act_bench.py``; the figures:
docs/04-scaling/performance.md): alone, numpy and torch's functional ops cost about the same per
call; as an actor calls it, between env steps that evict torch's much larger dispatch code from the
caches, numpy is clearly the faster.
numpy's BLAS sums in another order than torch's, so the outputs differ from the
module's in the last bits (relative 1e-7): the weights are the same and so are the actions, except
for two Q-values equal to within float32 rounding. numpy's BLAS must run one thread per process
where processes share cores (:func:`border_py.processes.children.worker_cpu`).

:class:`ConvInference` evaluates the conv Q-networks (the Nature and MinAtar CNN torsos, dense
layers, a linear or dueling head) with torch's functional ops in bfloat16, for actors that ask for
it (``actor_manager.policy_dtype``): on CPUs with AMX, Pong's dueling Nature-CNN
network takes less than half its float32 time per observation at 16 rows (in float32 the
functional path costs what the module does, so float32 acting keeps the module).

The recurrent Q-network's numpy step (R2D2's actors) is :mod:`border_py.agents.recurrent_inference`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from border_py.agents.layers import Layer, NotALayer, network_layers

__all__ = ["ACTING_DTYPES", "ConvInference", "MLPInference", "native_bfloat16"]


class MLPInference:
    """A plain MLP (a flattening ``input``, then ``linear`` layers with ``relu`` between them: see
    :mod:`border_py.agents.layers`) evaluated without module dispatch (numpy on CPU, torch's
    functional ops elsewhere); build it with :meth:`of`.

    Args:
        scale: what the input multiplies the observations by.
        layers: the MLP's ``Linear`` layers (with biases), in order.
    """

    def __init__(self, scale: float, layers: list[nn.Linear]) -> None:
        self.scale = scale
        self.layers = layers
        self._refresh()

    def _refresh(self) -> None:
        """Detached views of the layers' parameters (they share the parameters' storage)."""
        self.views = [(layer.weight.detach(), layer.bias.detach()) for layer in self.layers]
        self.addresses = self._addresses()
        self.device = self.views[0][0].device
        self.on_cpu = self.device.type == "cpu"
        if self.on_cpu:  # W.T as a view: BLAS takes the transposed layout as it is
            self.arrays = [(weight.numpy().T, bias.numpy()) for weight, bias in self.views]

    def _addresses(self) -> list[int]:
        """Where every parameter's data lives now (0 for one set to None). Read from
        ``_parameters``: ``Module.__getattr__`` alone would cost a fifth of a call."""
        return [
            0 if param is None else param.data_ptr()
            for layer in self.layers
            for param in (layer._parameters["weight"], layer._parameters["bias"])
        ]

    def _stale(self) -> bool:
        """Whether any parameter was replaced or moved to other storage (``.to()``,
        ``share_memory()``, ``load_state_dict(assign=True)``) since the views were taken.
        Addresses tell: ``share_memory()`` moves the storage that the views share, which torch
        views follow but numpy arrays do not (they would read freed memory)."""
        return self._addresses() != self.addresses

    @classmethod
    def of(cls, net: nn.Module) -> MLPInference | None:
        """The fast path for ``net`` if it is a plain MLP, else None (CNN torsos, dueling heads)."""
        found = _layers(net)
        if not found or found[0].op != "input" or not found[0].flatten:
            return None
        linears = _dense(found[1:])
        return None if linears is None else cls(found[0].scale, linears)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The MLP's outputs for a batch of observations, float32 numpy (B, out)."""
        if self._stale():
            self._refresh()
        if self.on_cpu:
            return self._numpy_forward(obs)
        x = torch.as_tensor(obs, device=self.device)
        if x.dim() != 2:  # what VectorInput does: flatten, float32, scale
            x = x.flatten(1)
        if x.dtype != torch.float32:
            x = x.float()
        if self.scale != 1.0:
            x = x * self.scale
        last = len(self.views) - 1
        for i, (weight, bias) in enumerate(self.views):
            x = F.linear(x, weight, bias)
            if i < last:
                x = torch.relu(x)
        return x.cpu().numpy()

    def _numpy_forward(self, obs: np.ndarray) -> np.ndarray:
        """The forward pass with numpy on the CPU weights (each step writes into a new array)."""
        x = obs
        if x.ndim != 2:  # what VectorInput does: flatten, float32, scale
            if x.ndim < 2:
                raise ValueError(f"observations of shape {x.shape}: expected a batch (B, ...)")
            x = x.reshape(len(x), math.prod(x.shape[1:]))
        if x.dtype != np.float32:
            x = x.astype(np.float32)
        if self.scale != 1.0:
            x = x * np.float32(self.scale)
        last = len(self.arrays) - 1
        for i, (weight_t, bias) in enumerate(self.arrays):
            x = x @ weight_t
            x += bias
            if i < last:
                np.maximum(x, 0.0, out=x)
        return x


ACTING_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def native_bfloat16() -> bool:
    """Whether this machine's CPU has AMX's bfloat16 tiles, where bfloat16 acting pays (2.4x on
    Pong's network here). With AVX512-BF16 alone (oneDNN held to it) it measured 0.9x-1.1x of
    float32, and without either torch emulates bfloat16, 3-5x slower than float32."""
    return bool(torch.cpu.get_capabilities().get("amx_bf16"))


class ConvInference:
    """A conv Q-network evaluated with torch's functional ops (no module dispatch, no graph), the
    input scale folded into the first convolution's weights; build it with :meth:`of`.

    In float32 the outputs equal the module's to float32 rounding (the scale multiplies the
    weights instead of the pixels). In bfloat16 (weights and activations rounded to 8 bits of
    mantissa, pixels 0-255 exactly) they differ by a few tenths of a percent of the largest
    Q-value (trained MinAtar networks: median 0.3%): acting greedily on them picks another action
    only where two actions' values are about that close (the output layers run in float32, so
    close values are not rounded into ties). The weights used are refreshed whenever a
    parameter's version counter or address changed since the last refresh (checked at each
    call): ``load_state_dict`` (how actors load published weights), this project's optimizer
    steps (:class:`~border_py.agents.optim.Adam` counts its fused writes), ``share_memory()``,
    ``.to()``. Writes that bypass the counter (through ``.data``, a numpy view, or torch's own
    fused optimizers) are not seen.

    Args:
        scale: what the input multiplies the observations by (folded into the first convolution).
        convs: the torso's convolutions, each followed by ReLU, the last one's output flattened.
        hidden: the ``Linear`` layers between the torso and the head, each followed by ReLU.
        value: a dueling head's value stream (``Linear`` layers, ReLU between them); none for a
            plain head.
        advantage: the advantage stream of a dueling head, or the plain head's one ``Linear``.
        dtype: ``float32`` or ``bfloat16``: the precision the forward pass runs in.
    """

    def __init__(
        self,
        scale: float,
        convs: list[nn.Conv2d],
        hidden: list[nn.Linear],
        value: list[nn.Linear],
        advantage: list[nn.Linear],
        dtype: str = "float32",
    ) -> None:
        self.scale = scale
        self.convs = convs
        self.hidden = hidden
        self.dueling = bool(value)
        self.value, self.advantage = value, advantage
        self.dtype = ACTING_DTYPES[dtype]
        self.channels_last = self.dtype == torch.bfloat16  # faster in bf16, slower in float32
        self.layers: list[nn.Conv2d | nn.Linear] = [
            *self.convs,
            *hidden,
            *self.value,
            *self.advantage,
        ]
        self.stamp: list[tuple[int, int]] = []

    @classmethod
    def of(cls, net: nn.Module, dtype: str = "float32") -> ConvInference | None:
        """The fast path for ``net`` if it is a conv Q-network (:func:`~border_py.agents.networks.
        q_network` with a CNN torso: convolutions with ReLU after each, flattened, ``Linear``
        layers with ReLU after each, a ``Linear`` or dueling head), else None."""
        found = _layers(net) or []
        ops = [layer.op for layer in found]
        if not found or ops[0] != "input" or found[0].flatten or "flatten" not in ops:
            return None
        cut = ops.index("flatten")  # the torso: the input, convolutions with ReLU, flatten
        torso, body = found[1:cut], found[cut + 1 :]
        if not torso or ops[1:cut] != ["conv", "relu"] * (len(torso) // 2) or not body:
            return None
        *hidden, head = body
        if [layer.op for layer in hidden] != ["linear", "relu"] * (len(hidden) // 2):
            return None
        if head.op == "dueling":
            value, advantage = _dense(head.value), _dense(head.advantage)
        else:
            value, advantage = [], _dense([head])
        if value is None or advantage is None:
            return None
        return cls(
            found[0].scale,
            [layer.module for layer in torso if isinstance(layer.module, nn.Conv2d)],
            [layer.module for layer in hidden if isinstance(layer.module, nn.Linear)],
            value,
            advantage,
            dtype,
        )

    def _refresh(self) -> None:
        """The weights in the acting precision: the first convolution's times the input scale,
        the others as views (float32) or rounded copies (bfloat16)."""
        with torch.no_grad():
            convs = []
            for k, conv in enumerate(self.convs):
                weight = conv.weight.detach()
                weight = (weight * self.scale if k == 0 else weight).to(self.dtype)
                if self.channels_last:
                    weight = weight.contiguous(memory_format=torch.channels_last)
                convs.append((weight, _bias(conv).to(self.dtype), conv.stride))
            self.conv_weights = convs

            def cast(
                layers: list[nn.Linear], output: bool
            ) -> list[tuple[torch.Tensor, torch.Tensor]]:
                """The layers' weights in the acting precision; an ``output`` stream's last
                layer's as they are (float32)."""
                weights = [
                    (m.weight.detach().to(self.dtype), _bias(m).to(self.dtype)) for m in layers
                ]
                if output and layers:
                    weights[-1] = (layers[-1].weight.detach(), _bias(layers[-1]))
                return weights

            self.hidden_weights = cast(self.hidden, output=False)
            self.value_weights = cast(self.value, output=True)
            self.advantage_weights = cast(self.advantage, output=True)
        self.device = self.convs[0].weight.device
        self.stamp = self._stamp()

    def _stamp(self) -> list[tuple[int, int]]:
        """Every parameter's in-place version and address (0, 0 for a bias set to None)."""
        return [
            (0, 0) if param is None else (int(param._version), param.data_ptr())
            for layer in self.layers
            for param in (layer._parameters["weight"], layer._parameters["bias"])
        ]

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """The network's Q-values for a batch of observations, float32 numpy (B, n_actions)."""
        if self._stamp() != self.stamp:
            self._refresh()
        with torch.inference_mode():
            x = torch.as_tensor(obs, device=self.device).to(self.dtype)
            if self.channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            for weight, bias, stride in self.conv_weights:
                x = torch.relu(F.conv2d(x, weight, bias, stride))
            x = _mlp(x.flatten(1), self.hidden_weights, relu_last=True)
            advantage = _stream(x, self.advantage_weights)
            if self.dueling:
                value = _stream(x, self.value_weights)
                advantage = value + advantage - advantage.mean(dim=-1, keepdim=True)
            return advantage.cpu().numpy()


def _bias(layer: nn.Conv2d | nn.Linear) -> torch.Tensor:
    """A layer's bias, detached (the networks :meth:`ConvInference.of` takes all have one)."""
    if layer.bias is None:
        raise ValueError(f"{layer} has no bias")
    return layer.bias.detach()


def _layers(net: nn.Module) -> list[Layer] | None:
    """``net``'s layers (:func:`~border_py.agents.layers.network_layers`), or None when it holds
    another module (no fast path then)."""
    try:
        return network_layers(net, "")
    except NotALayer:
        return None


def _dense(layers: Sequence[Layer]) -> list[nn.Linear] | None:
    """The ``Linear`` modules of ``layers`` if they are ``linear`` layers with ``relu`` between
    them (at least one), else None."""
    ops = [layer.op for layer in layers]
    if ops != ["linear", "relu"] * (len(ops) // 2) + ["linear"]:
        return None
    return [layer.module for layer in layers if isinstance(layer.module, nn.Linear)]


def _stream(x: torch.Tensor, weights: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """An output stream: its hidden layers in the acting precision, its output layer (float32
    weights) and everything after it in float32, so that close Q-values are not rounded into
    ties (bfloat16 resolves 3.0 from 3.016, and ``argmax`` breaks a tie by the lowest index)."""
    x = _mlp(x, weights[:-1], relu_last=True)
    weight, bias = weights[-1]
    return F.linear(x.float(), weight, bias)


def _mlp(
    x: torch.Tensor, weights: list[tuple[torch.Tensor, torch.Tensor]], relu_last: bool
) -> torch.Tensor:
    """Linear layers with ReLU between them (and after the last with ``relu_last``)."""
    last = len(weights) - 1
    for i, (weight, bias) in enumerate(weights):
        x = F.linear(x, weight, bias)
        if i < last or relu_last:
            x = torch.relu(x)
    return x
