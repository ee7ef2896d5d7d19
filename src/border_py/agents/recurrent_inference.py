"""Acting with a recurrent Q-network without torch's per-call overhead: one step of
:class:`~border_py.agents.recurrent.RecurrentQNetwork` in numpy, on views of its CPU weights.

An actor steps its recurrent policy once per vector step on a handful of rows, where
``nn.LSTM``'s module dispatch and torch's operator dispatch cost far more than the arithmetic
(the torch step: about 0.5 ms a call on 8 rows, the numpy step a small fraction of it;
``benchmarks/recurrent_throughput.py`` measures what an actor gains). :class:`RecurrentInference`
computes what :meth:`~border_py.agents.recurrent.RecurrentQNetwork.step` computes, in the same
order of operations:

    x      = the torso's features: observations flattened, float32, times the input scale, then
             the fully connected layers with ReLU after each
    input  = [x, one-hot previous action (zeros for -1), previous reward (if fed)]
    LSTM     (PyTorch's gate order i, f, g, o)
             gates = input W_ih^T + b_ih + h W_hh^T + b_hh
             c' = sigmoid(f) c + sigmoid(i) tanh(g);   h' = sigmoid(o) tanh(c')
    GRU      (PyTorch's gate order r, z, n)
             r = sigmoid(i_r + h_r);  z = sigmoid(i_z + h_z);  n = tanh(i_n + r h_n)
             h' = (1 - z) n + z h
    Q      = the head on h' (linear layers with ReLU between them, or dueling:
             ``V + A - mean_a A``)

(sigmoid as ``(1 + tanh(x / 2)) / 2``: no overflow for large negative gates). numpy's BLAS sums
in another order than torch's, so Q and the states differ from the module's in the last bits
(relative 1e-6 after an episode's steps): the greedy actions are the module's except between
two Q-values equal to within float32 rounding.

The arrays are views of the parameters (they share storage), so they follow every in-place
change: optimizer steps and ``load_state_dict`` (how an actor loads published weights: it copies
into the parameters). Parameters replaced or moved to other storage (``.to()``,
``share_memory()``, ``load_state_dict(assign=True)``) are noticed by their addresses at the next
call and viewed anew, as :class:`~border_py.agents.inference.MLPInference` does.

Only CPU networks with an MLP torso take this path (:meth:`RecurrentInference.of`); a conv torso's
cost is its convolutions, and a GPU's is the launches, neither of which numpy removes: those
networks step with the module.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from border_py.agents.layers import Layer, NotALayer, network_layers
from border_py.agents.recurrent import RecurrentQNetwork

__all__ = ["RecurrentInference"]

Dense = list[tuple[np.ndarray, np.ndarray]]  # (W, b as a column) per linear layer


class RecurrentInference:
    """One acting step of a :class:`~border_py.agents.recurrent.RecurrentQNetwork` in numpy (see
    the module docstring); build it with :meth:`of`.

    Args:
        net: the network (on the CPU, with an MLP torso: :meth:`of` checks).
        scale: what the torso's input multiplies the observations by.
        torso: the torso's ``Linear`` layers (each followed by ReLU).
        value: a dueling head's value stream (``Linear`` layers, ReLU between them); none for a
            plain head.
        advantage: the dueling head's advantage stream, or the plain head's layers.
    """

    def __init__(
        self,
        net: RecurrentQNetwork,
        scale: float,
        torso: list[nn.Linear],
        value: list[nn.Linear],
        advantage: list[nn.Linear],
    ) -> None:
        self.net, self.scale = net, scale
        self.lstm = net.state_parts == 2
        self.hidden, self.n_actions = net.core_size, net.n_actions
        self.torso_layers, self.value_layers, self.advantage_layers = torso, value, advantage
        self.dueling = bool(value)
        self.modules: list[nn.Module] = [*torso, net.core, *value, *advantage]
        self.width = torso[-1].out_features if torso else int(net.core.input_size) - self.extra
        # the LSTM's gates i, f, g, o in one pass: sigmoid(x) = tanh(x / 2) / 2 + 1/2 on i, f, o,
        # tanh(x) = tanh(x / 1) / 1 + 0 on g (a column each, applied to every env's column)
        half, one, zero, size = np.float32(0.5), np.float32(1.0), np.float32(0.0), self.hidden
        self.gate_scale = np.repeat([half, half, one, half], size).astype(np.float32)[:, None]
        self.gate_shift = np.repeat([half, half, zero, half], size).astype(np.float32)[:, None]
        self.one_hot = np.eye(self.n_actions + 1, dtype=np.float32)[1:]  # column a + 1: action a
        self._refresh()

    @property
    def extra(self) -> int:
        """The core's inputs after the features: the one-hot previous action, the reward."""
        return self.n_actions + int(self.net.prev_reward)

    @classmethod
    def of(cls, net: RecurrentQNetwork) -> RecurrentInference | None:
        """The numpy step of ``net`` if it is on the CPU with an MLP torso, else None."""
        core = net.core
        if next(net.parameters()).device.type != "cpu" or not _plain_core(core):
            return None
        found = _layers(net.torso)
        if not found or found[0].op != "input" or not found[0].flatten:
            return None
        torso = _stack(found[1:], relu_last=True)
        head = _layers(net.head)
        if torso is None or not head:
            return None
        if head[0].op == "dueling":
            value, advantage = _stack(head[0].value), _stack(head[0].advantage)
        else:
            value, advantage = [], _stack(head)
        if value is None or advantage is None:
            return None
        return cls(net, found[0].scale, torso, value, advantage)

    def _refresh(self) -> None:
        """numpy views of the parameters (they share the parameters' storage).

        Raises:
            RuntimeError: the network left the CPU.
        """
        device = next(self.net.parameters()).device
        if device.type != "cpu":
            raise RuntimeError(f"the network moved to {device}: numpy acting needs it on the CPU")

        def views(layers: list[nn.Linear]) -> Dense:
            return [
                (_parameter(layer, "weight").numpy(), _parameter(layer, "bias").numpy()[:, None])
                for layer in layers
            ]

        core = self.net.core
        self.torso = views(self.torso_layers)
        self.value, self.advantage = views(self.value_layers), views(self.advantage_layers)
        self.w_ih = _parameter(core, "weight_ih_l0").numpy()  # (k * hidden, inputs)
        self.w_hh = _parameter(core, "weight_hh_l0").numpy()  # (k * hidden, hidden)
        self.b_ih = _parameter(core, "bias_ih_l0").numpy()[:, None]
        self.b_hh = _parameter(core, "bias_hh_l0").numpy()[:, None]
        self.addresses = self._addresses()

    def _addresses(self) -> list[int]:
        """Where every parameter's data lives now (0 for one set to None). Read from
        ``_parameters``: ``Module.__getattr__`` costs more."""
        return [
            0 if param is None else param.data_ptr()
            for module in self.modules
            for param in module._parameters.values()
        ]

    def __call__(
        self,
        obs: np.ndarray,
        prev_action: np.ndarray,
        prev_reward: np.ndarray,
        state: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(Q (n, n_actions), next state (n, k, hidden))``, float32, for ``obs``
        ``(n, *obs_shape)``, ``prev_action`` (int, -1: none) and ``prev_reward`` ``(n,)`` and each
        env's state before this step ``(n, k, hidden)``: what the module's ``step`` returns.

        Every array is computed transposed, a column per env (``W @ x``: OpenBLAS multiplies a few
        columns by a row-major weight about 3 times faster than a few rows by its transpose), and
        in as few numpy calls as the maths allows (each costs about a microsecond, whatever the
        handful of envs).

        Raises:
            ValueError: ``obs`` is not a batch (fewer than 2 dimensions).
        """
        if self._addresses() != self.addresses:
            self._refresh()
        n, width = len(obs), self.width
        inputs = np.empty((self.w_ih.shape[1], n), dtype=np.float32)  # the core's, a column each
        self._features(obs, inputs[:width])
        actions = np.asarray(prev_action, dtype=np.int64) + 1  # one_hot's column 0: zeros
        np.take(self.one_hot, actions, axis=1, out=inputs[width : width + self.n_actions])
        if self.net.prev_reward:
            inputs[-1] = prev_reward
        state = np.asarray(state, dtype=np.float32)
        h = np.ascontiguousarray(state[:, 0].T)  # (hidden, n)
        gates = self.w_ih @ inputs
        gates += self.b_ih
        gates_h = self.w_hh @ h
        gates_h += self.b_hh
        next_state = np.empty((n, 2 if self.lstm else 1, self.hidden), dtype=np.float32)
        if self.lstm:
            gates += gates_h
            h_next = self._lstm(gates, state[:, 1].T, next_state[:, 1].T)
        else:
            h_next = _gru(gates, gates_h, h, self.hidden)
        next_state[:, 0] = h_next.T
        return self._head(h_next).T, next_state

    def _features(self, obs: np.ndarray, out: np.ndarray) -> None:
        """The torso's output, a column per env, into ``out``: ``VectorInput`` (flatten,
        float32, scale), then its layers."""
        x = obs
        if x.ndim != 2:
            if x.ndim < 2:
                raise ValueError(f"observations of shape {x.shape}: expected a batch (B, ...)")
            x = x.reshape(len(x), math.prod(x.shape[1:]))
        if not self.torso:
            np.multiply(x.T, np.float32(self.scale), out=out)
            return
        x = np.array(x.T, dtype=np.float32, order="C")
        if self.scale != 1.0:
            x *= np.float32(self.scale)
        x = _dense(x, self.torso[:-1], relu_last=True)
        weight, bias = self.torso[-1]
        np.matmul(weight, x, out=out)
        out += bias
        np.maximum(out, 0.0, out=out)

    def _lstm(self, gates: np.ndarray, c: np.ndarray, c_next: np.ndarray) -> np.ndarray:
        """The LSTM cell (columns) from its gates' pre-activations: writes ``c'`` into
        ``c_next``, returns ``h'``."""
        gates *= self.gate_scale  # sigmoid on i, f and o, tanh on g: 4 calls for the 4 gates
        np.tanh(gates, out=gates)
        gates *= self.gate_scale
        gates += self.gate_shift
        size = self.hidden
        i, f, g, o = (gates[k * size : (k + 1) * size] for k in range(4))
        np.multiply(f, c, out=c_next)
        i *= g
        c_next += i
        h_next = np.tanh(c_next)
        h_next *= o
        return h_next

    def _head(self, h: np.ndarray) -> np.ndarray:
        """Q from the core's output (columns): the plain head, or ``V + A - mean_a A``."""
        advantage = _dense(h, self.advantage, relu_last=False)
        if not self.dueling:
            return advantage
        value = _dense(h, self.value, relu_last=False)
        return value + advantage - advantage.mean(axis=0, keepdims=True)


def _gru(gates: np.ndarray, gates_h: np.ndarray, h: np.ndarray, hidden: int) -> np.ndarray:
    """The GRU cell (columns) from its gate pre-activations (the input's and the state's):
    returns ``h'``."""
    gates[: 2 * hidden] += gates_h[: 2 * hidden]
    rz = _sigmoid(gates[: 2 * hidden])
    r, z = rz[:hidden], rz[hidden:]
    n = gates[2 * hidden :]
    r *= gates_h[2 * hidden :]
    n += r
    np.tanh(n, out=n)
    h_next = h - n
    h_next *= z
    h_next += n  # (1 - z) n + z h
    return h_next


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """``x`` replaced by ``1 / (1 + exp(-x))``, computed as ``(1 + tanh(x / 2)) / 2``: equal,
    without overflow."""
    x *= np.float32(0.5)
    np.tanh(x, out=x)
    x *= np.float32(0.5)
    x += np.float32(0.5)
    return x


def _parameter(module: nn.Module, name: str) -> torch.Tensor:
    """``module``'s parameter ``name``, detached (a view of its storage)."""
    param = module._parameters[name]
    if param is None:
        raise ValueError(f"{type(module).__name__} has no {name}")
    return param.detach()


def _dense(x: np.ndarray, layers: Dense, relu_last: bool) -> np.ndarray:
    """Linear layers (columns: ``W @ x + b``) with ReLU between them (and after the last with
    ``relu_last``)."""
    last = len(layers) - 1
    for i, (weight, bias) in enumerate(layers):
        x = weight @ x
        x += bias
        if i < last or relu_last:
            np.maximum(x, 0.0, out=x)
    return x


def _plain_core(core: nn.Module) -> bool:
    """Whether ``core`` is the one-layer, biased, unidirectional LSTM or GRU the network builds
    (what the numpy cell computes)."""
    return (
        type(core) in (nn.LSTM, nn.GRU)
        and isinstance(core, nn.RNNBase)
        and core.num_layers == 1
        and core.bias
        and not core.bidirectional
        and getattr(core, "proj_size", 0) == 0
    )


def _layers(module: nn.Module) -> list[Layer] | None:
    """``module``'s layers (:func:`~border_py.agents.layers.network_layers`), or None when it
    holds another module."""
    try:
        return network_layers(module, "")
    except NotALayer:
        return None


def _stack(
    layers: list[Layer] | tuple[Layer, ...], relu_last: bool = False
) -> list[nn.Linear] | None:
    """The ``Linear`` modules of ``layers`` if they are ``linear`` layers with ``relu`` between
    them (and after the last with ``relu_last``; none at all is a stack then), else None."""
    ops = [layer.op for layer in layers]
    pairs = len(ops) // 2
    expected = ["linear", "relu"] * pairs if relu_last else ["linear", "relu"] * pairs + ["linear"]
    if ops != expected:
        return None
    return [layer.module for layer in layers if isinstance(layer.module, nn.Linear)]
