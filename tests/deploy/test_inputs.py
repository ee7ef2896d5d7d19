"""What a policy takes: ``Policy.predict`` and every export take the env's observations (uint8
frames unscaled) and refuse, in one line naming the shape and dtype expected, frames scaled to
floats (which a uint8 model would scale a second time, or cast to zeros) and another layout."""

from __future__ import annotations

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
    for predict in (policy_of(space).predict, exported.predict):
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
    np.testing.assert_array_equal(actions, exported.predict(obs)[0])
    for wrong in (obs / 255.0, obs.astype(np.float32), obs.transpose(0, 2, 3, 1)):
        assert "expected uint8 (unscaled" in refusal_line(exported.forward, wrong)
    assert "forward takes a batch" in refusal_line(exported.forward, obs[0])


def test_a_float_space_takes_any_real_numbers(tmp_path):
    space = gym.spaces.Box(-2, 2, (5,), np.float32)
    obs = sample_observations(space, 8, seed=2)
    for predict in (policy_of(space).predict, numpy_export(space, tmp_path).predict):
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
