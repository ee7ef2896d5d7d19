"""What a policy takes: ``Policy.predict`` and every export take the env's observations (uint8
frames unscaled) and refuse, in one line naming the shape and dtype expected, frames scaled to
floats (which a uint8 model would scale a second time, or cast to zeros) and another layout."""

from __future__ import annotations

import functools
import importlib.util
import io
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py.agents.dqn import DQN
from border_py.deploy.describe import describe
from border_py.deploy.export import check_refusals, numpy_files, onnx_bytes, torchscript_bytes
from border_py.deploy.graph import greedy_module, sample_observations
from border_py.deploy.load import Policy
from border_py.envs.factory import GymEnvFactory
from border_py.errors import RunError

SPACES = {
    "atari": gym.spaces.Box(0, 255, (4, 36, 36), np.uint8),  # the Nature CNN: scaled by 1/255
    "minatar": gym.spaces.Box(0, 1, (4, 10, 10), np.uint8),  # MinAtar's 0/1 grids: not scaled
}
ACTIONS = gym.spaces.Discrete(5)


def greedy(space: gym.Space) -> torch.nn.Module:
    return greedy_module(DQN(space, ACTIONS, seed=3, hidden_sizes=[16]), ACTIONS)


def policy_of(space: gym.Space) -> Policy:
    """A :class:`Policy` of an untrained DQN on ``space`` (the checks come before the agent)."""
    return Policy(
        agent=DQN(space, ACTIONS, seed=3, hidden_sizes=[16]),
        env_factory=GymEnvFactory(id="CartPole-v1"),
        checkpoint=Path("run/checkpoints/best"),
        config={"env": {"id": "CartPole-v1"}},
        env_id="CartPole-v1",
        agent_name="DQN",
        opt_steps=1,
        env_steps=1,
        observation_space=space,
        action_space=ACTIONS,
    )


def numpy_export(space: gym.Space, tmp_path: Path) -> Any:
    """The numpy export of :func:`greedy`, written, and loaded as its user loads it: its
    ``policy.py`` by path."""
    description = describe(policy_of(space), "numpy")
    for name, data in numpy_files(greedy(space), space, description, "export").items():
        with (tmp_path / name).open("wb") as f:
            f.write(data) if isinstance(data, bytes) else data(f)
    spec = importlib.util.spec_from_file_location("border_policy", tmp_path / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load(tmp_path)


def frames(space: gym.Space, n: int = 16) -> np.ndarray:
    """``n`` frames of ``space`` with every value it can hold (the bounds included)."""
    obs = sample_observations(space, n, seed=11)
    obs[0] = space.low
    obs[1] = space.high
    return obs


def deterministic(predict):
    """``predict`` with ``deterministic=True`` (SB3's default, False, explores)."""
    return functools.partial(predict, deterministic=True)


def refusal_line(call, obs) -> str:
    """The one line ``call(obs)`` refuses ``obs`` with (a ``ValueError``)."""
    with pytest.raises(ValueError) as caught:
        call(obs)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", list(SPACES))
def test_predict_takes_the_envs_frames_and_refuses_scaled_ones(name, tmp_path):
    space = SPACES[name]
    obs = frames(space)
    shape = space.shape
    exported = numpy_export(space, tmp_path)
    for predict in (deterministic(policy_of(space).predict), deterministic(exported.predict)):
        want = predict(obs)[0]
        assert want.shape == (len(obs),)
        # the same values in other integer dtypes (lists of ints, int64 arrays) give the same actions
        np.testing.assert_array_equal(predict(obs.astype(np.int64))[0], want)
        assert predict(obs[3].tolist())[0] == want[3]
        for scaled in (obs.astype(np.float32) / np.float32(space.high.max()), obs.astype(float)):
            line = refusal_line(predict, scaled)
            assert line.startswith(f"observations of shape {scaled.shape} and dtype {scaled.dtype}")
            assert f"expected uint8 (unscaled: the model scales them) of shape {shape}" in line
        too_big = obs.astype(np.int64) + 256
        assert "expected uint8" in refusal_line(predict, too_big)  # never wrapped around
        hwc = np.ascontiguousarray(obs.transpose(0, 2, 3, 1))  # (B, H, W, C) where (B, C, H, W)
        line = refusal_line(predict, hwc)
        assert line.startswith(f"observations of shape {hwc.shape} and dtype uint8: expected")
        assert f"of shape {shape} (one) or (B, *{shape}) (a batch)" in line
        assert refusal_line(predict, hwc[0]).startswith(f"observations of shape {hwc.shape[1:]}")


def test_the_numpy_forward_takes_a_batch_of_the_spaces_dtype_only(tmp_path):
    space = SPACES["atari"]
    exported = numpy_export(space, tmp_path)
    obs = frames(space)
    actions, _ = exported.forward(obs)
    np.testing.assert_array_equal(actions, exported.predict(obs, deterministic=True)[0])
    for wrong in (obs / 255.0, obs.astype(np.float32), obs.transpose(0, 2, 3, 1)):
        assert "expected uint8 (unscaled" in refusal_line(exported.forward, wrong)
    assert "forward takes a batch" in refusal_line(exported.forward, obs[0])


def test_a_float_space_takes_any_real_numbers(tmp_path):
    space = gym.spaces.Box(-2, 2, (5,), np.float32)
    obs = sample_observations(space, 8, seed=2)
    for predict in (
        deterministic(policy_of(space).predict),
        deterministic(numpy_export(space, tmp_path).predict),
    ):
        want = predict(obs)[0]
        np.testing.assert_array_equal(predict(obs.astype(np.float64))[0], want)
        assert predict([0, 1, 0, 1, 0])[0] == predict(np.array([0, 1, 0, 1, 0], np.float32))[0]
        assert "expected float32 of shape (5,)" in refusal_line(predict, obs[:, :4])
        assert "dtype bool" in refusal_line(predict, obs > 0)


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", list(SPACES))
def test_torchscript_takes_the_envs_frames_and_refuses_scaled_ones(name):
    space = SPACES[name]
    module = greedy(space)
    obs = frames(space)
    data, _ = torchscript_bytes(module, torch.as_tensor(obs[:2]), space)
    model = torch.jit.load(io.BytesIO(data))  # as its user loads it
    actions, _ = model(torch.as_tensor(obs))
    np.testing.assert_array_equal(actions.numpy(), module(torch.as_tensor(obs))[0].numpy())
    wrong = [
        torch.as_tensor(obs).float() / float(space.high.max()),  # scaled frames
        torch.as_tensor(obs).float(),  # frames as floats in [0, 255]
        torch.as_tensor(obs).permute(0, 2, 3, 1).contiguous(),  # (B, H, W, C)
    ]
    for bad in wrong:
        with pytest.raises(torch.jit.Error) as caught:
            model(bad)
        # TorchScript puts its own traceback before the model's one line
        line = str(caught.value).strip().splitlines()[-1]
        assert line.startswith(f"builtins.ValueError: observations of shape {list(bad.shape)}")
        assert line.endswith(
            f"expected a batch (B, *{space.shape}) of uint8 (unscaled: the model scales them),"
            " as the env gives them"
        )


@pytest.mark.slow
def test_onnx_refuses_float_frames_and_another_layout():
    import onnxruntime

    space = SPACES["atari"]
    module = greedy(space)
    obs = frames(space)
    data, _ = onnx_bytes(module, torch.as_tensor(obs[:2]))
    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    actions, _ = session.run(["action", "values"], {"obs": obs})
    np.testing.assert_array_equal(actions, module(torch.as_tensor(obs))[0].numpy())
    with pytest.raises(Exception, match=r"expected: \(tensor\(uint8\)\)"):
        session.run(["action", "values"], {"obs": obs.astype(np.float32) / 255})
    with pytest.raises(Exception, match=r"invalid dimensions for input: obs"):
        session.run(["action", "values"], {"obs": np.ascontiguousarray(obs.transpose(0, 2, 3, 1))})


def test_an_export_that_takes_scaled_frames_is_not_published():
    space = SPACES["atari"]
    obs = frames(space)
    module = greedy(space)

    def lenient(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # main's numpy forward
        with torch.no_grad():
            action, values = module(torch.as_tensor(batch))
        return action.numpy(), values.numpy()

    with pytest.raises(RunError, match=r"^m: the written model takes float observations"):
        check_refusals("m", lenient, obs)
    _, checked = torchscript_bytes(module, torch.as_tensor(obs[:2]), space)
    check_refusals("m", checked, obs)  # the check export_policy runs on what it writes


# One rule for every format: an integer space takes integers its dtype holds, a float space real
# numbers (integers or floats), a bool space bools; each in the space's shape. (space, input,
# taken) rows, the input a function of the space's sampled batch.
RULE_SPACES = {
    "uint8": gym.spaces.Box(0, 255, (3,), np.uint8),
    "int64": gym.spaces.Box(-5, 5, (3,), np.int64),
    "float32": gym.spaces.Box(-2, 2, (3,), np.float32),
    "bool": gym.spaces.Box(0, 1, (3,), np.bool_),
}
RULE = [
    ("uint8", "as given", lambda o: o, True),
    ("uint8", "int64", lambda o: o.astype(np.int64), True),
    ("uint8", "int16", lambda o: o.astype(np.int16), True),
    ("uint8", "int8 within 0..127", lambda o: (o // 2).astype(np.int8), True),
    ("uint8", "int64 with 256", lambda o: o.astype(np.int64) + 256, False),
    ("uint8", "int64 with -1", lambda o: o.astype(np.int64) - 256, False),
    ("uint8", "whole-valued float32", lambda o: o.astype(np.float32), False),
    ("uint8", "scaled float32", lambda o: o.astype(np.float32) / 255, False),
    ("uint8", "float64", lambda o: o.astype(np.float64), False),
    ("uint8", "bool", lambda o: o > 127, False),
    ("uint8", "another shape", lambda o: o[:, :2], False),
    ("int64", "as given", lambda o: o, True),
    ("int64", "int8", lambda o: o.astype(np.int8), True),
    ("int64", "int32", lambda o: o.astype(np.int32), True),
    ("int64", "whole-valued float64", lambda o: o.astype(np.float64), False),
    ("int64", "bool", lambda o: o > 0, False),
    ("float32", "as given", lambda o: o, True),
    ("float32", "float64", lambda o: o.astype(np.float64), True),
    ("float32", "float16", lambda o: o.astype(np.float16), True),
    ("float32", "int64", lambda o: np.round(o).astype(np.int64), True),
    ("float32", "uint8", lambda o: (o > 0).astype(np.uint8), True),
    ("float32", "bool", lambda o: o > 0, False),
    ("float32", "complex64", lambda o: o.astype(np.complex64), False),
    ("float32", "another shape", lambda o: o[:, :, None], False),
    ("bool", "as given", lambda o: o, True),
    ("bool", "uint8 0/1", lambda o: o.astype(np.uint8), False),
    ("bool", "int64 0/1", lambda o: o.astype(np.int64), False),
    ("bool", "float32 0/1", lambda o: o.astype(np.float32), False),
]


def _rule_case(
    space_name: str, make
) -> tuple[gym.spaces.Box, torch.nn.Module, np.ndarray, np.ndarray]:
    """The space, its greedy module, a sampled batch and ``make`` of it."""
    space = RULE_SPACES[space_name]
    sample = sample_observations(space, 8, seed=5)
    sample[0] = space.low
    sample[1] = space.high
    return space, greedy(space), sample, make(sample)


def _actions(module: torch.nn.Module, obs: np.ndarray, space: gym.Space) -> np.ndarray:
    """The greedy actions of ``module`` for ``obs`` in the space's dtype."""
    return module(torch.as_tensor(obs.astype(space.dtype)))[0].numpy()


def _taken_as(forward, obs: np.ndarray, refusals: tuple[type[Exception], ...]) -> np.ndarray | None:
    """The actions ``forward`` gives ``obs``, or None where it refuses them (``refusals``: the
    format's own errors)."""
    try:
        return np.asarray(forward(obs)[0])
    except refusals:
        return None


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    ("space_name", "what", "make", "taken"), RULE, ids=[f"{r[0]}-{r[1]}" for r in RULE]
)
def test_every_format_takes_and_refuses_the_same_inputs(space_name, what, make, taken, tmp_path):
    """``Policy.predict``, the numpy export (its ``predict`` and ``forward``) and TorchScript
    take exactly the table's inputs, acting on them as on the same values in the space's dtype."""
    space, module, sample, obs = _rule_case(space_name, make)
    exported = numpy_export(space, tmp_path)
    _, torchscript = torchscript_bytes(module, torch.as_tensor(sample[:2]), space)
    forwards = {
        "predict": deterministic(policy_of(space).predict),
        "numpy predict": deterministic(exported.predict),
        "numpy forward": exported.forward,
        "torchscript": lambda batch: torchscript(np.asarray(batch)),
    }
    for name, forward in forwards.items():
        got = _taken_as(forward, obs, (ValueError, torch.jit.Error))
        assert (got is not None) == taken, f"{name} {'refuses' if taken else 'takes'} {what}"
        if taken:
            np.testing.assert_array_equal(got, _actions(module, obs, space))


@pytest.mark.slow
def test_onnx_takes_the_spaces_dtype_only_and_refuses_what_every_format_refuses():
    """ONNX's runtime takes the space's exact dtype: of the table, the rows in it, refusing every
    row the other formats refuse."""
    import onnxruntime
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

    sessions = {}
    for space_name, what, make, taken in RULE:
        space, module, sample, obs = _rule_case(space_name, make)
        if space_name not in sessions:
            data, _ = onnx_bytes(module, torch.as_tensor(sample[:2]))
            sessions[space_name] = onnxruntime.InferenceSession(
                data, providers=["CPUExecutionProvider"]
            )
        session = sessions[space_name]
        got = _taken_as(
            lambda batch, session=session: session.run(["action", "values"], {"obs": batch}),
            obs,
            (InvalidArgument, RuntimeError),
        )
        exact = obs.dtype == space.dtype and obs.shape[1:] == space.shape
        assert (got is not None) == (taken and exact), f"onnx on {space_name}: {what}"
        if got is not None:
            np.testing.assert_array_equal(got, _actions(module, obs, space))
