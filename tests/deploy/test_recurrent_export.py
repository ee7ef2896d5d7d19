"""``border export`` of a recurrent run (R2D2, an LSTM; a GRU fed the previous reward): each
format steps through whole episodes as the torch policy does (the same action at every step of
every episode, Q to float32 tolerance), its state an explicit input and output fed back by the
caller; the numpy export runs without torch or border-py and its ``predict`` carries the state
as SB3's recurrent policies do."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch

from border_py import load_policy
from border_py.cli.main import main
from border_py.deploy.export import export_policy
from border_py.deploy.recurrent_export import check_sequences, numpy_step
from border_py.errors import RunError

from .conftest import run_isolated

SEEDS = (5, 6, 7)

# numpy's in the fast tier; TorchScript's and ONNX's exporters and processes take seconds (the
# LSTM's ONNX, the GRU's TorchScript: every export checks its own steps over sequences anyway)
CASES = [
    *((name, "numpy") for name in ("r2d2", "r2d2_gru")),
    pytest.param("r2d2", "onnx", marks=pytest.mark.slow),
    pytest.param("r2d2_gru", "torchscript", marks=pytest.mark.slow),
]

# steps the export through each recorded episode from zeros, feeding back its own state and
# actions (and the recorded rewards); the numpy export's predict alongside, carrying its state
PLAY = """
import json, numpy as np
episodes = np.load("episodes.npz")
lstm, takes_reward = {lstm}, {takes_reward}
{load}
out = {{}}
for e in range(len(episodes.files) // 2):
    obs, rewards = episodes[f"obs{{e}}"], episodes[f"reward{{e}}"]
    h = np.zeros((1, 1, {hidden}), np.float32)
    c = h.copy() if lstm else None
    prev_action, prev_reward = np.full(1, -1), np.zeros(1, np.float32)
    state, start = None, np.ones(1, bool)
    actions, values = [], []
    for t in range(len(obs)):
        action, q, h, c = step(obs[t][None], h, c, prev_action, prev_reward)
        if predict is not None:
            single, state = predict(obs[t], state, start, deterministic=True)
            assert single == action[0], (e, t)
            if takes_reward:
                state = state._replace(prev_reward=rewards[t:t + 1])
            start = np.zeros(1, bool)
        actions.append(int(action[0]))
        values.append(q[0])
        prev_action, prev_reward = action.astype(np.int64), rewards[t:t + 1]
    out[f"action{{e}}"], out[f"values{{e}}"] = np.array(actions), np.stack(values)
np.savez("played.npz", **out)
"""

LOAD = {
    "numpy": """
import importlib.util
spec = importlib.util.spec_from_file_location("border_policy", "{out}/policy.py")
policy = importlib.util.module_from_spec(spec)
spec.loader.exec_module(policy)
net = policy.load("{out}")
step, predict = net.step, net.predict
""",
    "torchscript": """
import torch
model = torch.jit.load("{out}")
predict = None
def step(obs, h, c, prev_action, prev_reward):
    inputs = [obs, h] + ([c] if lstm else []) + [prev_action] + ([prev_reward] if takes_reward else [])
    with torch.no_grad():
        got = [t.numpy() for t in model(*(torch.as_tensor(x) for x in inputs))]
    return got[0], got[1], got[2], (got[3] if lstm else None)
""",
    "onnx": """
import onnxruntime
session = onnxruntime.InferenceSession("{out}", providers=["CPUExecutionProvider"])
names = [i.name for i in session.get_inputs()]
predict = None
def step(obs, h, c, prev_action, prev_reward):
    given = dict(obs=obs, h=h, c=c, prev_action=prev_action, prev_reward=prev_reward)
    got = session.run(None, {{name: given[name] for name in names}})
    return got[0], got[1], got[2], (got[3] if lstm else None)
""",
}


def record_episodes(policy, tmp_path) -> list[dict[str, np.ndarray]]:
    """The torch policy's greedy episodes from :data:`SEEDS`: observations, rewards, actions
    and Q-values at every step; saved for the export's process as ``episodes.npz``."""
    agent, episodes = policy.agent, []
    for seed in SEEDS:
        env = policy.make_env()
        obs, _ = env.reset(seed=seed)
        state = agent.initial_state(1)
        prev_action, prev_reward = np.full(1, -1), np.zeros(1, np.float32)
        seen, rewards, actions, values = [], [], [], []
        done = False
        while not done:
            with torch.no_grad():
                q, next_state = agent.q.step(
                    torch.as_tensor(obs[None]),
                    torch.as_tensor(prev_action),
                    torch.as_tensor(prev_reward),
                    torch.as_tensor(state),
                )
            action = int(q.argmax(dim=1)[0])
            seen.append(obs)
            actions.append(action)
            values.append(q[0].numpy())
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(np.float32(reward))
            state, done = next_state.numpy(), terminated or truncated
            prev_action, prev_reward = np.array([action]), np.array([reward], np.float32)
        env.close()
        episodes.append(
            {
                "obs": np.stack(seen),
                "reward": np.array(rewards, np.float32),
                "action": np.array(actions),
                "values": np.stack(values),
            }
        )
    arrays = {f"{key}{e}": ep[key] for e, ep in enumerate(episodes) for key in ("obs", "reward")}
    np.savez(tmp_path / "episodes.npz", **arrays)
    return episodes


@pytest.mark.parametrize(("name", "fmt"), CASES)
def test_an_export_plays_whole_episodes_as_the_policy(trained, tmp_path, name, fmt):
    run = trained(name)
    policy = load_policy(run)
    episodes = record_episodes(policy, tmp_path)
    out = tmp_path / f"policy.{fmt}"
    assert export_policy(run, fmt, out) == out  # main refused a recurrent agent here
    q = policy.agent.q
    code = PLAY.format(
        lstm=q.state_parts == 2,
        takes_reward=bool(q.prev_reward),
        hidden=q.core_size,
        load=LOAD[fmt].format(out=out),
    )
    blocked = ("torch", "border_py") if fmt == "numpy" else ("border_py",)
    done = run_isolated(code, tmp_path, blocked)
    assert done.returncode == 0, done.stderr[-2000:]
    played = np.load(tmp_path / "played.npz")
    for e, episode in enumerate(episodes):
        assert len(episode["action"]) == 51  # POPGym's whole episode
        np.testing.assert_array_equal(played[f"action{e}"], episode["action"])
        np.testing.assert_allclose(played[f"values{e}"], episode["values"], rtol=1e-4, atol=1e-5)
    where = (
        out / "preprocessing.json"
        if fmt == "numpy"
        else tmp_path / f"{out.name}.preprocessing.json"
    )
    state = json.loads(where.read_text())["state"]
    lstm = name == "r2d2"
    assert state["inputs"] == (
        ["obs", "h", "c", "prev_action"] if lstm else ["obs", "h", "prev_action", "prev_reward"]
    )
    assert state["outputs"][2:] == (["next_h", "next_c"] if lstm else ["next_h"])
    assert state["shapes"]["h"] == [1, "B", 16]
    assert "at an episode's first step pass" in state["contract"]
    if fmt == "numpy":
        readme = (out / "README.txt").read_text()
        assert (
            "State (" in readme and "net.predict(obs, state, start, deterministic=True)" in readme
        )


def test_the_export_check_fails_a_model_that_drops_its_state(trained, tmp_path):
    policy = load_policy(trained("r2d2"))
    out = export_policy(trained("r2d2"), "numpy", tmp_path / "export")
    spec = importlib.util.spec_from_file_location("border_policy", out / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    net = module.load(out)
    step = numpy_step(net)
    q, space = policy.agent.q, policy.observation_space
    check_sequences("ok", q, space, step)  # the export as written passes

    def forgetful(inputs):  # acts from zeros at every step: a state not carried
        return step(inputs | {"h": np.zeros_like(inputs["h"]), "c": np.zeros_like(inputs["c"])})

    with pytest.raises(
        RunError, match=r"^forgetful: the written model's .* differ from the policy's at step 1$"
    ):
        check_sequences("forgetful", q, space, forgetful)


def test_border_export_of_a_recurrent_run_from_the_command_line(trained, tmp_path, capsys):
    out = tmp_path / "exported"
    assert main(["export", str(trained("r2d2_gru")), "--format", "numpy", "-o", str(out)]) == 0
    network = json.loads((out / "network.json").read_text())
    assert network["kind"] == "recurrent" and network["core"]["type"] == "gru"
    assert network["prev_reward"] is True and network["hidden"] == 16
