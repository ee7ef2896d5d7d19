"""A border-py policy exported to numpy (``border export --format numpy``): needs numpy only.

Copied into the export's dir as ``policy.py``, beside ``network.json`` (the layers), ``weights.npz``
(their arrays), ``preprocessing.json`` (what the policy expects) and ``env.py`` (the env, built
without border-py). Load it by its path (the export's dir is never put on ``sys.path``, where a
file beside it could stand in for numpy)::

    import importlib.util
    spec = importlib.util.spec_from_file_location("border_policy", "export/policy.py")
    policy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(policy)
    net = policy.load("export")
    env = net.make_env(raw=True)                 # the env as gymnasium.make gives it
    x, stack = net.preprocess(raw_obs)           # the network's input (then pass stack back)
    action, _ = net.predict(x, deterministic=True)

``predict`` is Stable-Baselines3's, ``predict(observation, state=None, episode_start=None,
deterministic=False) -> (action, state)``; an export is greedy: pass ``deterministic=True``. A
recurrent policy (R2D2) carries a :class:`RecurrentState` as sb3-contrib's ``RecurrentPPO`` does
(zeroed where ``episode_start`` is True); ``step`` is that step with the state as explicit arrays
(the ONNX export's inputs and outputs). ``forward`` gives a batch's greedy actions and values
(Q-values; IQN: the mean over its quantile levels; SAC: the Gaussian mean before squashing).
Observations of another shape or dtype are refused in one line (:func:`as_batch`). Convolutions
run on strided views, a batch in chunks of :data:`CHUNK` rows to bound the views' copies.
"""

from __future__ import annotations

import importlib.util
import json
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

__all__ = ["NumpyPolicy", "RecurrentState", "as_batch", "episode_state", "load"]

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


def sigmoid(x: np.ndarray) -> np.ndarray:
    """The logistic function, without overflow warnings for large ``|x|``."""
    return np.float32(0.5) * (np.tanh(np.float32(0.5) * x) + np.float32(1))


def core_step(
    core: dict[str, Any], x: np.ndarray, h: np.ndarray, c: Any, arrays: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray | None]:
    """One step of ``torch.nn.LSTM`` (gates i, f, g, o) or ``torch.nn.GRU`` (gates r, z, n) for
    inputs ``x`` (B, in) and states ``h``, ``c`` (B, hidden; ``c`` None for a GRU): ``(h, c)``."""
    w_ih, w_hh = arrays[core["w_ih"]], arrays[core["w_hh"]]
    gates_x = x @ w_ih.T + arrays[core["b_ih"]]
    gates_h = h @ w_hh.T + arrays[core["b_hh"]]
    if core["type"] == "lstm":
        assert c is not None
        i, f, g, o = np.split(gates_x + gates_h, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        return sigmoid(o) * np.tanh(c), c
    r_x, z_x, n_x = np.split(gates_x, 3, axis=1)
    r_h, z_h, n_h = np.split(gates_h, 3, axis=1)
    r, z = sigmoid(r_x + r_h), sigmoid(z_x + z_h)
    n = np.tanh(n_x + r * n_h)
    return (np.float32(1) - z) * n + z * h, None


class RecurrentState(NamedTuple):
    """A recurrent policy's state for ``n`` envs: what ``predict`` returns and takes back.

    Attributes:
        h: the core's hidden state, float32 ``(1, n, hidden)``.
        c: an LSTM's cell state, float32 ``(1, n, hidden)``; None for a GRU.
        prev_action: the action each env took last, int64 ``(n,)`` (-1: none yet).
        prev_reward: the reward that followed it, float32 ``(n,)``: NaN from ``predict`` for a
            policy that takes it, for the caller to set (``state._replace(prev_reward=r)``).
    """

    h: np.ndarray
    c: np.ndarray | None
    prev_action: np.ndarray
    prev_reward: np.ndarray


def episode_state(
    state: Any, episode_start: Any, n: int, hidden: int, lstm: bool, takes_reward: bool
) -> RecurrentState:
    """The state ``n`` envs act from: ``state`` (what ``predict`` returned; None: zeros), zeroed
    where ``episode_start`` is True (no previous action, reward 0), as ``RecurrentPPO`` does.

    Raises:
        ValueError: a state or ``episode_start`` not for ``n`` envs of this policy, or a
            previous reward unset for a policy that takes it (one line).
    """
    starts = np.zeros(n, bool) if episode_start is None else np.asarray(episode_start, bool)
    starts = starts.reshape(-1) if starts.size == n else starts
    if starts.shape != (n,):
        raise ValueError(
            f"episode_start of shape {np.shape(episode_start)}: expected one flag per env ({n},)"
        )
    if state is None:
        zeros = np.zeros((1, n, hidden), np.float32)
        state = RecurrentState(zeros, zeros if lstm else None, np.full(n, -1), np.zeros(n))
    expected = (
        f"expected the state predict returned for {n} envs (h{', c' if lstm else ''}:"
        f" (1, {n}, {hidden}); prev_action, prev_reward: ({n},)), or None at the first call"
    )
    if not (isinstance(state, tuple) and len(state) == 4) or (state[1] is None) == lstm:
        raise ValueError(f"state of type {type(state).__name__}: {expected}")
    h = np.asarray(state[0], np.float32)
    c = None if state[1] is None else np.asarray(state[1], np.float32)
    action, reward = np.asarray(state[2]), np.asarray(state[3], np.float32)
    shapes = [x.shape for x in (h, c) if x is not None], action.shape, reward.shape
    if shapes != ([(1, n, hidden)] * (1 + lstm), (n,), (n,)) or action.dtype.kind not in "iu":
        raise ValueError(f"a state of shapes {shapes}: {expected}")
    keep = ~starts
    if takes_reward and np.isnan(reward[keep]).any():
        raise ValueError(
            "state.prev_reward is not set: this policy takes the reward of its previous action;"
            " after each env step set state = state._replace(prev_reward=reward)"
        )
    kept = keep[None, :, None]
    return RecurrentState(
        np.where(kept, h, np.float32(0)),
        None if c is None else np.where(kept, c, np.float32(0)),
        np.where(keep, action, -1).astype(np.int64),
        np.where(keep, reward, 0).astype(np.float32),
    )


def as_batch(obs: Any, shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, bool]:
    """``obs`` as a batch of ``dtype`` (one observation of ``shape``, or a batch of them), and
    whether it was one observation.

    Every export takes what this takes: an integer space takes integers its dtype holds (the model
    scales a uint8 frame itself), a float space real numbers, a bool space bools.

    Raises:
        ValueError: another shape, or a dtype that would change the values (one line).
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
            " env gives them (an export's preprocess(raw_obs) turns the raw env's into these)"
        )
    return batch.astype(want, copy=False), single


class NumpyPolicy:
    """The exported greedy policy in the dir ``path`` (``network.json``, ``weights.npz``)."""

    def __init__(self, path: str | Path = HERE) -> None:
        path = Path(path).resolve()
        self.network = json.loads((path / "network.json").read_text())
        with np.load(path / "weights.npz", allow_pickle=False) as npz:
            self.arrays = {name: npz[name] for name in npz.files}
        self.obs_shape = tuple(self.network["observation"]["shape"])
        self.obs_dtype = np.dtype(self.network["observation"]["dtype"])
        self.recurrent = self.network["kind"] == "recurrent"
        self.path = path

    @cached_property
    def env_py(self) -> Any:
        """The export's ``env.py`` (numpy and gymnasium), imported from this dir by its path."""
        spec = importlib.util.spec_from_file_location("border_policy_env", self.path / "env.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        return module

    @cached_property
    def description(self) -> dict[str, Any]:
        """The export's ``preprocessing.json``."""
        return json.loads((self.path / "preprocessing.json").read_text())

    def make_env(self, render_mode: str | None = None, raw: bool = False, trust: Any = ()) -> Any:
        """The env ``border eval`` plays, from the export alone (``raw``: before the steps
        :meth:`preprocess` applies; ``trust``: packages ``env.py`` may import beyond its own)."""
        return self.env_py.make_env(self.description, render_mode, raw, tuple(trust))

    def preprocess(self, obs: Any, state: Any = None) -> tuple[np.ndarray, Any]:
        """A raw env's observation as the network's input, and the frame stack's state after it
        (None without one): pass None at an episode's first observation, then what it returned."""
        return self.env_py.preprocess(self.description, obs, state)

    def forward(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Greedy actions and their values for a batch of observations (see :func:`as_batch`).

        Raises:
            ValueError: not a batch of the space's shape and dtype (one line).
        """
        if self.recurrent:
            raise ValueError("a recurrent policy acts with a state: use step(...) or predict(...)")
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

    def step(
        self,
        obs: Any,
        h: np.ndarray,
        c: np.ndarray | None,
        prev_action: np.ndarray,
        prev_reward: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """One greedy step of a recurrent policy for ``B`` envs: ``(action, values, next_h,
        next_c)`` from observations ``(B, *shape)``, the core's state ``h`` (an LSTM's ``c``;
        None for a GRU) ``(1, B, hidden)`` (zeros at an episode's start), the previous action
        ``(B,)`` (-1 at the start) and, for a policy that takes it, the reward that followed.

        Raises:
            ValueError: not a recurrent policy, or observations of another shape or dtype.
        """
        net = self.network
        if not self.recurrent:
            raise ValueError("not a recurrent policy: forward(obs) or predict(obs)")
        if net["prev_reward"] and prev_reward is None:
            raise ValueError("this policy takes the previous reward: pass prev_reward")
        batch, _ = as_batch(obs, self.obs_shape, self.obs_dtype)
        features = run(net["torso"], batch, self.arrays)
        action = np.asarray(prev_action).reshape(-1)
        one_hot = np.zeros((len(batch), net["n_actions"]), np.float32)
        given = np.flatnonzero(action >= 0)
        one_hot[given, action[given]] = 1
        parts = [features, one_hot]
        if net["prev_reward"]:
            parts.append(np.asarray(prev_reward, np.float32).reshape(-1, 1))
        x = np.concatenate(parts, axis=1)
        cell = None if c is None else np.asarray(c, np.float32)[0]
        next_h, next_c = core_step(net["core"], x, np.asarray(h, np.float32)[0], cell, self.arrays)
        q = run(net["head"], next_h, self.arrays)
        return q.argmax(axis=1), q, next_h[None], None if next_c is None else next_c[None]

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Any]:
        """``(action, state)`` as Stable-Baselines3's ``predict`` (one observation: one action).
        Greedy only: pass ``deterministic=True``. A feed-forward policy returns ``state`` as
        given; a recurrent one returns its next :class:`RecurrentState`.

        Raises:
            ValueError: ``deterministic=False``, observations of another shape or dtype (see
                :func:`as_batch`), or a state that is not this policy's (one line).
        """
        if not deterministic:
            raise ValueError(
                "an exported policy is greedy only: pass deterministic=True (SB3's default,"
                " False, samples an exploring action, which the export does not keep)"
            )
        batch, single = as_batch(observation, self.obs_shape, self.obs_dtype)
        if not self.recurrent:
            actions = self.forward(batch)[0]
            return (actions[0] if single else actions), state
        net = self.network
        lstm, takes_reward = net["core"]["type"] == "lstm", net["prev_reward"]
        now = episode_state(state, episode_start, len(batch), net["hidden"], lstm, takes_reward)
        actions, _, h, c = self.step(batch, now.h, now.c, now.prev_action, now.prev_reward)
        reward = np.full(len(batch), np.nan if takes_reward else 0.0, np.float32)
        after = RecurrentState(h, c, actions.astype(np.int64), reward)
        return (actions[0] if single else actions), after


def load(path: str | Path = HERE) -> NumpyPolicy:
    """The policy exported in ``path`` (by default this file's dir)."""
    return NumpyPolicy(path)
