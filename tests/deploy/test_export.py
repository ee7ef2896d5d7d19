"""``border export`` / ``export_policy``: each format gives the loaded policy's greedy actions and
values on 1,000 observations sampled from the observation space, run where border-py (and for
numpy, torch) cannot be imported; bad input is one line and replaces nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from border_py import load_policy
from border_py.agents.dqn import DQN
from border_py.agents.iqn import IQN, midpoints
from border_py.agents.networks import VectorInput
from border_py.agents.sac import SAC
from border_py.cli.main import main
from border_py.deploy import numpy_policy
from border_py.deploy.describe import describe, readme
from border_py.deploy.export import export_policy
from border_py.deploy.graph import GreedyQ, greedy_module, sample_observations
from border_py.deploy.load import Policy
from border_py.deploy.numpy_network import numpy_network
from border_py.envs.factory import GymEnvFactory
from border_py.errors import ConfigError

from ..conftest import REPO
from .conftest import PIXELS_TRUST, assert_same_policy, run_isolated

N_OBS = 1000


def reference(policy, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The loaded policy's greedy actions and the values they come from, by the agent's own
    methods (Q-values; IQN: the mean over its midpoint levels; SAC: the Gaussian mean)."""
    actions, _ = policy.predict(obs, deterministic=True)
    agent = policy.agent
    if policy.agent_name == "SAC":
        return actions, agent.policy_outputs(obs)[0]
    if policy.agent_name == "IQN":
        taus = midpoints(agent.args.k, agent.device).expand(len(obs), agent.args.k)
        with torch.no_grad():
            return actions, agent.q_values(torch.as_tensor(obs), taus, agent.z).numpy()
    return actions, agent.q_values(obs)


RUN_NUMPY = """
import importlib.util
import numpy as np
spec = importlib.util.spec_from_file_location("border_policy", {out!r} + "/policy.py")
policy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(policy)
try:
    import torch
except ImportError:
    pass
else:
    raise SystemExit("torch imported")
net = policy.load({out!r})
actions, values = net.forward(np.load("obs.npy"))
single, state = net.predict(np.load("obs.npy")[0], deterministic=True)
assert state is None and np.allclose(single, actions[0], rtol=1e-5, atol=1e-6)
np.save("actions.npy", actions)
np.save("values.npy", values)
"""

RUN_TORCHSCRIPT = """
import numpy as np
import torch
model = torch.jit.load({out!r})
actions, values = model(torch.as_tensor(np.load("obs.npy")))
np.save("actions.npy", actions.numpy())
np.save("values.npy", values.numpy())
"""


# numpy's in the fast tier; onnx's exporter and a process importing torch take seconds each
CASES = [
    *((name, "numpy") for name in ("dqn", "iqn", "sac")),
    ("pixels", "numpy"),  # the Nature CNN and a dueling head: the numpy export's conv layers
    *(
        pytest.param(name, fmt, marks=pytest.mark.slow)
        for name in ("dqn", "iqn", "sac")
        for fmt in ("torchscript", "onnx")
    ),
]


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_an_export_gives_the_policys_actions_and_values(trained, tmp_path, name, fmt):
    trust = PIXELS_TRUST if name == "pixels" else None
    policy = load_policy(trained(name), trust=trust)
    obs = sample_observations(policy.observation_space, N_OBS, seed=7)
    np.save(tmp_path / "obs.npy", obs)
    out = tmp_path / f"policy.{fmt}"
    assert export_policy(trained(name), fmt, out, trust=trust) == out
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(out), providers=["CPUExecutionProvider"])
        actions, values = session.run(["action", "values"], {"obs": obs})
    else:
        code = RUN_NUMPY if fmt == "numpy" else RUN_TORCHSCRIPT
        blocked = ("torch", "border_py") if fmt == "numpy" else ("border_py",)
        done = run_isolated(code.format(out=str(out)), tmp_path, blocked)
        assert done.returncode == 0, done.stderr[-2000:]
        actions, values = np.load(tmp_path / "actions.npy"), np.load(tmp_path / "values.npy")
    assert_same_policy(actions, values, *reference(policy, obs))
    description = (
        out / "preprocessing.json"
        if fmt == "numpy"
        else tmp_path / f"policy.{fmt}.preprocessing.json"
    )
    described = json.loads(description.read_text())
    assert described["env_id"] == policy.env_id and described["format"] == fmt
    assert described["observation"]["shape"] == list(policy.observation_space.shape)
    assert described["observation"]["dtype"] == policy.observation_space.dtype.name
    assert described["agent"] == policy.agent_name and described["opt_steps"] == policy.opt_steps
    assert described["checkpoint"] == "run/checkpoints/best"  # no path of this machine
    assert str(trained(name).parent) not in description.read_text()


def test_the_numpy_export_refuses_a_layer_it_cannot_run():
    space = gym.spaces.Box(-1, 1, (4,), np.float32)
    net = torch.nn.Sequential(VectorInput(), torch.nn.Linear(4, 2), torch.nn.Tanh())
    with pytest.raises(
        ConfigError, match=r"^q\.2: a Tanh layer, which the numpy export cannot run"
    ):
        numpy_network(GreedyQ(net), space)


def export(args: list[str], capsys) -> tuple[int, list[str]]:
    """``border export <args>`` in this process: its status and its stderr lines."""
    status = main(["export", *args])
    return status, capsys.readouterr().err.strip().splitlines()


def test_the_command_says_how_it_is_used(capsys):
    assert main(["export", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: border export <run dir | checkpoint dir>")
    assert main(["export"]) == 2
    assert main(["--help"]) == 0
    assert "  export    export a policy" in capsys.readouterr().out


def test_bad_input_is_one_line_and_replaces_nothing(trained, tmp_path, capsys):
    run = str(trained("dqn"))
    status, err = export([run, "--format", "tflite", "-o", str(tmp_path / "m")], capsys)
    assert status == 2 and err == [
        "border: error: --format tflite: unknown; formats: onnx, torchscript, numpy"
    ]
    status, err = export([str(tmp_path), "--format", "numpy", "-o", str(tmp_path / "m")], capsys)
    assert status == 2 and len(err) == 1 and "not a border-py run" in err[0]
    status, err = export([run, "--format", "numpy"], capsys)
    assert status == 2 and len(err) == 1 and "-o" in err[0]
    status, err = export([run, "--format", "numpy", "-o", str(tmp_path / "m"), "seed=1"], capsys)
    assert status == 2 and len(err) == 1 and err[0].startswith("border: error: seed:")

    mine = tmp_path / "mine.onnx"
    mine.write_bytes(b"user data")
    status, err = export([run, "--format", "torchscript", "-o", str(mine)], capsys)
    assert status == 2 and len(err) == 1 and "exists" in err[0] and "--force" in err[0]
    assert mine.read_bytes() == b"user data"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("keep")
    status, err = export([run, "--format", "numpy", "-o", str(notes), "--force"], capsys)
    assert status == 2 and len(err) == 1 and "not a numpy export" in err[0]
    assert os.listdir(notes) == ["keep.txt"]
    link = tmp_path / "link.pt"
    link.symlink_to(mine)
    status, err = export([run, "--format", "torchscript", "-o", str(link), "--force"], capsys)
    assert status == 2 and len(err) == 1 and "symbolic link" in err[0]
    assert link.is_symlink() and mine.read_bytes() == b"user data"


def test_force_replaces_an_earlier_export(trained, tmp_path, capsys):
    out = tmp_path / "policy"
    status, err = export([str(trained("dqn")), "--format", "numpy", "-o", str(out)], capsys)
    assert status == 0, err
    first = (out / "weights.npz").read_bytes()
    assert export([str(trained("iqn")), "--format", "numpy", "-o", str(out)], capsys)[0] == 2
    assert (out / "weights.npz").read_bytes() == first
    status, err = export([str(trained("iqn")), "-f", "numpy", "-o", str(out), "--force"], capsys)
    assert status == 0, err
    assert json.loads((out / "network.json").read_text())["kind"] == "quantile"
    assert sorted(os.listdir(out)) == [
        "README.txt",
        "env.py",
        "network.json",
        "policy.py",
        "preprocessing.json",
        "weights.npz",
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["policy"]  # no temporary dir left


def test_an_untrusted_run_is_refused_before_anything_is_written(trained, tmp_path, capsys):
    out = tmp_path / "pixels"
    status, err = export([str(trained("pixels")), "--format", "numpy", "-o", str(out)], capsys)
    assert status == 2 and len(err) == 1 and "trust=[tests.deploy.pixel_env]" in err[0]
    assert not out.exists()
    args = [str(trained("pixels")), "--format", "numpy", "-o", str(out), "trust=[tests.deploy]"]
    assert export(args, capsys)[0] == 0 and (out / "policy.py").is_file()


@pytest.mark.slow
def test_onnx_without_its_extra_is_one_line_naming_it(trained, tmp_path):
    code = (
        "import sys\n"
        "sys.modules['onnxscript'] = None\n"
        "from border_py.cli.main import main\n"
        f"sys.exit(main(['export', {str(trained('dqn'))!r}, '--format', 'onnx', '-o', 'm.onnx']))\n"
    )
    paths = [str(REPO / "src"), os.environ.get("PYTHONPATH", "")]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "border: error: --format onnx needs onnxscript: pip install 'border-py[export]'"
    ]
    assert not (tmp_path / "m.onnx").exists()


ARCHITECTURES = {
    "dqn-mlp-dueling": (DQN, gym.spaces.Box(-2, 2, (5,), np.float32), {"dueling": True}),
    "dqn-uint8-vector": (DQN, gym.spaces.Box(0, 255, (3, 4), np.uint8), {}),  # Atari RAM-like
    "iqn-cnn": (IQN, gym.spaces.Box(0, 255, (2, 40, 38), np.uint8), {"k": 5}),
    "dqn-minatar-grid": (DQN, gym.spaces.Box(0, 1, (4, 10, 10), np.uint8), {}),  # MinAtarCNN
    "sac-2d-actions": (SAC, gym.spaces.Box(-1, 1, (6,), np.float32), {}),
}


@pytest.mark.parametrize("arch", list(ARCHITECTURES))
def test_the_numpy_layers_compute_what_the_torch_networks_do(tmp_path, arch):
    agent_class, obs_space, hparams = ARCHITECTURES[arch]
    if agent_class is SAC:
        act_space = gym.spaces.Box(
            np.array([[-1, 0]] * 2, np.float32), np.array([[1, 3]] * 2, np.float32)
        )
    else:
        act_space = gym.spaces.Discrete(4)
    agent = agent_class(obs_space, act_space, seed=1, hidden_sizes=[16, 8], **hparams)
    module = greedy_module(agent, act_space)
    network, arrays = numpy_network(module, obs_space)
    (tmp_path / "network.json").write_text(json.dumps(network))
    np.savez(tmp_path / "weights.npz", **arrays)
    obs = sample_observations(obs_space, 300, seed=5)
    with torch.no_grad():
        want = [t.numpy() for t in module(torch.as_tensor(obs))]
    actions, values = numpy_policy.load(tmp_path).forward(obs)
    assert_same_policy(actions, values, *want)
    assert actions.shape == (300, *act_space.shape)


@pytest.mark.parametrize(
    ("space", "scaling"),
    [
        (gym.spaces.Box(0, 255, (2, 40, 38), np.uint8), "uint8 values scaled by 1/255"),
        (gym.spaces.Box(0, 15, (8,), np.uint8), "uint8 values scaled by 1/15"),
        (gym.spaces.Box(0, 1, (4, 10, 10), np.uint8), "none: pass the env's observations"),
        (gym.spaces.Box(-2, 2, (5,), np.float32), "none: pass the env's observations"),
    ],
)
def test_preprocessing_json_states_the_scale_the_network_applies(space, scaling):
    # MinAtar's 0/1 grids go in as they are: the description must not claim 1/255
    agent = DQN(space, gym.spaces.Discrete(3), seed=0, hidden_sizes=[8])
    policy = Policy(
        agent=agent,
        env_factory=GymEnvFactory(id="CartPole-v1"),
        checkpoint=Path("run/checkpoints/best"),
        config={"env": {"id": "CartPole-v1"}},
        env_id="CartPole-v1",
        agent_name="DQN",
        opt_steps=1,
        env_steps=1,
        observation_space=space,
        action_space=gym.spaces.Discrete(3),
    )
    described = describe(policy, "numpy")["observation"]["scaling"]
    assert described.startswith(scaling)
    assert scaling in readme(describe(policy, "numpy"), "export")
