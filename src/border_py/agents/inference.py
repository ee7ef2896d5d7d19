"""Acting with a small MLP without torch's per-call overhead.

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
where processes share cores (:func:`border_py.processes.children.one_thread_each`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from border_py.agents.networks import VectorInput


class MLPInference:
    """A plain MLP (:class:`VectorInput`, then ``Linear`` layers with ``ReLU`` between them)
    evaluated without module dispatch (numpy on CPU, torch's functional ops elsewhere); build it
    with :meth:`of`.

    Args:
        encoder: the MLP's input module (flattening and scaling).
        layers: the MLP's ``Linear`` layers (with biases), in order.
    """

    def __init__(self, encoder: VectorInput, layers: list[nn.Linear]) -> None:
        self.encoder = encoder
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
        if not isinstance(net, nn.Sequential) or len(net) < 2:
            return None
        encoder, *rest = list(net)
        if not isinstance(encoder, VectorInput) or len(rest) % 2 == 0:
            return None
        expected = [nn.Linear if i % 2 == 0 else nn.ReLU for i in range(len(rest))]
        if any(type(module) is not kind for module, kind in zip(rest, expected, strict=True)):
            return None
        layers = [m for m in rest if isinstance(m, nn.Linear)]
        return cls(encoder, layers) if all(m.bias is not None for m in layers) else None

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
        if self.encoder.scale != 1.0:
            x = x * self.encoder.scale
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
        if self.encoder.scale != 1.0:
            x = x * np.float32(self.encoder.scale)
        last = len(self.arrays) - 1
        for i, (weight_t, bias) in enumerate(self.arrays):
            x = x @ weight_t
            x += bias
            if i < last:
                np.maximum(x, 0.0, out=x)
        return x
