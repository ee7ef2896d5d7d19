"""Acting with a small MLP without torch's per-call overhead.

An actor calls its policy once per vector step on a handful of rows, where ``nn.Module`` dispatch
(``__call__``, hooks, ``Sequential`` iteration), autograd bookkeeping on parameters that require
gradients, and grad-mode context managers cost more than the arithmetic. :class:`MLPInference`
evaluates a plain MLP with the functional ops its modules would call (``F.linear``,
``torch.relu``) on detached views of their weights: no graph is recorded (nothing requires a
gradient), the kernels and weights are the same, so the outputs are bit-identical to the module's
forward (and the actions equal). The views share storage with the parameters, so they follow
every in-place change (optimizer steps, ``load_state_dict``, which copies into the parameters);
parameters replaced or moved to other storage by a module-wide operation are noticed at the next
call and viewed anew.

``benchmarks/act_bench.py`` compares it with the module call, with ``torch.inference_mode`` and
preallocated output buffers, and with numpy matmuls; numpy is not bit-identical to torch (a
different BLAS sums in a different order), so actions could differ near ties.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from border_py.agents.networks import VectorInput


class MLPInference:
    """A plain MLP (:class:`VectorInput`, then ``Linear`` layers with ``ReLU`` between them)
    evaluated without module dispatch; build it with :meth:`of`.

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
        self.device = self.views[0][0].device
        self.on_cpu = self.device.type == "cpu"

    def _stale(self) -> bool:
        """Whether the module's parameters were replaced or moved to other storage (``.to()``,
        ``share_memory()``, ``load_state_dict(assign=True)``: all of them at once) since the views
        were taken; the first weight tells (read from ``_parameters``: ``Module.__getattr__`` alone
        would cost a fifth of a call)."""
        first = self.layers[0]._parameters["weight"]
        return first is None or first.data_ptr() != self.views[0][0].data_ptr()

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
        x = torch.from_numpy(obs) if self.on_cpu else torch.as_tensor(obs, device=self.device)
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
        return x.numpy() if self.on_cpu else x.cpu().numpy()
