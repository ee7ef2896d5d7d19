"""A border-py policy exported to numpy (``border export --format numpy``): needs numpy only.

This file is copied into the export's dir as ``policy.py``, beside ``network.json`` (the layers,
in order), ``weights.npz`` (their arrays) and ``preprocessing.json`` (what the policy expects).
Neither torch nor border-py is needed to run it; load it by its path (the export's dir is never
put on ``sys.path``, where a file beside it could stand in for numpy)::

    import importlib.util
    spec = importlib.util.spec_from_file_location("border_policy", "export/policy.py")
    policy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(policy)
    net = policy.load("export")         # reads network.json and weights.npz there
    action, _ = net.predict(obs)        # one observation -> one action, a batch -> a batch
    actions, values = net.forward(batch)

Observations go in as the env gives them: of the space's shape and a dtype of its kind (integers
that fit an integer space: a uint8 one the model scales itself; numbers for a float space; bools
for a bool space). Anything else, such as frames already scaled to floats in [0, 1], is refused in
one line (:func:`as_batch`).

``forward`` gives the greedy actions and the values they come from: Q-values (DQN; IQN: the
mean over its fixed quantile levels) or the Gaussian mean before squashing (SAC). Convolutions
run on strided views of the input (``numpy.lib.stride_tricks.as_strided``), a batch in chunks of
:data:`CHUNK` rows to bound the views' copies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["NumpyPolicy", "as_batch", "load"]

HERE = Path(__file__).resolve().parent
CHUNK = 256  # rows per pass: a convolution's windows copy (rows, H', W', C * kh * kw) floats
Layers = list[dict[str, Any]]


def conv2d(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """A valid (unpadded) 2-d convolution of ``x`` (B, C, H, W) by ``weight`` (O, C, kh, kw)."""
    x = np.ascontiguousarray(x)
    b, c, h, w = x.shape
    _, _, kh, kw = weight.shape
    oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
    sb, sc, sh, sw = x.strides
    windows = np.lib.stride_tricks.as_strided(
        x, (b, oh, ow, c, kh, kw), (sb, sh * stride, sw * stride, sc, sh, sw), writeable=False
    )
    out = np.tensordot(windows, weight, axes=((3, 4, 5), (1, 2, 3)))  # (B, H', W', O)
    return (out + bias).transpose(0, 3, 1, 2)


def run(layers: Layers, x: np.ndarray, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """``x`` through ``layers`` (see ``network.json``), float32."""
    for layer in layers:
        op = layer["op"]
        if op == "input":  # the observation as float32, flattened or not, scaled
            x = x.astype(np.float32)
            if layer["flatten"]:
                x = x.reshape(len(x), -1)
            if layer["scale"] != 1.0:
                x = x * np.float32(layer["scale"])
        elif op == "conv":
            x = conv2d(x, arrays[layer["weight"]], arrays[layer["bias"]], layer["stride"])
        elif op == "linear":  # on the last axis
            x = x @ arrays[layer["weight"]].T + arrays[layer["bias"]]
        elif op == "relu":
            x = np.maximum(x, np.float32(0))
        elif op == "flatten":
            x = x.reshape(len(x), -1)
        elif op == "dueling":  # Q = V + A - mean_a A
            value, advantage = run(layer["value"], x, arrays), run(layer["advantage"], x, arrays)
            x = value + advantage - advantage.mean(axis=-1, keepdims=True)
        else:
            raise ValueError(f"layer {op!r}: unknown to this policy.py (export again)")
    return x


def as_batch(obs: Any, shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, bool]:
    """``obs`` as a batch of ``dtype`` (one observation of ``shape``, or a batch of them), and
    whether it was one observation.

    Every export takes what this takes: an integer space takes integers its dtype holds (a uint8
    frame is scaled by the model: frames scaled already, or floats in [0, 255], would be scaled
    twice or cast to zeros); a float space takes real numbers (integers or floats); a bool space
    takes bools.

    Raises:
        ValueError: another shape, or a dtype that would change the values (one line naming what
            is expected).
    """
    array = np.asarray(obs)
    single = array.shape == shape
    batch = array[None] if single else array
    kind, want = batch.dtype.kind, np.dtype(dtype)
    if want.kind == "b":
        fits = kind == "b"
    elif want.kind in "iu":
        fits = kind in "iu" and (batch.dtype == want or np.array_equal(batch.astype(want), batch))
    else:
        fits = kind in "iuf"
    if not (fits and batch.ndim == len(shape) + 1 and batch.shape[1:] == shape):
        unscaled = " (unscaled: the model scales them)" if want == np.uint8 else ""
        raise ValueError(
            f"observations of shape {array.shape} and dtype {array.dtype}: expected"
            f" {want.name}{unscaled} of shape {shape} (one) or (B, *{shape}) (a batch), as the"
            " env gives them"
        )
    return batch.astype(want, copy=False), single


class NumpyPolicy:
    """The exported greedy policy.

    Args:
        path: the export's dir (``network.json``, ``weights.npz``).
    """

    def __init__(self, path: str | Path = HERE) -> None:
        path = Path(path)
        self.network = json.loads((path / "network.json").read_text())
        with np.load(path / "weights.npz", allow_pickle=False) as npz:
            self.arrays = {name: npz[name] for name in npz.files}
        self.obs_shape = tuple(self.network["observation"]["shape"])
        self.obs_dtype = np.dtype(self.network["observation"]["dtype"])

    def forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Greedy actions and their values for a batch of observations (see :func:`as_batch`).

        Raises:
            ValueError: not a batch of the space's shape and dtype (one line).
        """
        batch, single = as_batch(obs, self.obs_shape, self.obs_dtype)
        if single:
            raise ValueError(
                f"one observation of shape {self.obs_shape}: forward takes a batch"
                f" (B, *{self.obs_shape}); predict takes one"
            )
        parts = [self._forward(batch[i : i + CHUNK]) for i in range(0, len(batch), CHUNK)]
        if not parts:
            raise ValueError("an empty batch of observations")
        actions, values = zip(*parts, strict=True)
        return np.concatenate(actions), np.concatenate(values)

    def _forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        net, arrays = self.network, self.arrays
        kind = net["kind"]
        if kind == "q":
            q = run(net["layers"], obs, arrays)
            return q.argmax(axis=1), q
        if kind == "quantile":  # the mean of Z_tau(s, .) over the fixed levels tau
            features = run(net["psi"], obs, arrays)  # (B, width)
            cosines = np.cos(arrays[net["taus"]][:, None] * arrays[net["i_pi"]][None, :])
            embedding = run(net["phi"], cosines, arrays)  # (K, width)
            quantiles = run(net["f"], features[:, None, :] * embedding[None], arrays)
            q = quantiles.mean(axis=1)
            return q.argmax(axis=1), q
        if kind == "gaussian":  # the squashed mean on the action bounds
            mean = np.split(run(net["layers"], obs, arrays), 2, axis=1)[0]
            low, high = arrays[net["low"]], arrays[net["high"]]
            action = np.clip((high + low) / 2 + (high - low) / 2 * np.tanh(mean), low, high)
            return action.reshape(len(obs), *net["action_shape"]).astype(np.float32), mean
        raise ValueError(f"network kind {kind!r}: unknown to this policy.py (export again)")

    def predict(self, obs: Any, deterministic: bool = True) -> tuple[np.ndarray, None]:
        """``(action, None)`` as Stable-Baselines3's ``predict``: one observation gives one
        action, a batch a batch (greedy only: ``deterministic=False`` is refused).

        Raises:
            ValueError: observations of another shape or dtype (see :func:`as_batch`).
        """
        if not deterministic:
            raise ValueError("an exported policy is greedy only: deterministic=False is not kept")
        batch, single = as_batch(obs, self.obs_shape, self.obs_dtype)
        actions = self.forward(batch)[0]
        return (actions[0] if single else actions), None


def load(path: str | Path = HERE) -> NumpyPolicy:
    """The policy exported in ``path`` (by default this file's dir)."""
    return NumpyPolicy(path)
