"""Exports carry their env: a process that cannot import border-py (the numpy export's: nor
torch) builds the env from the export's own files alone (``env.py`` and ``preprocessing.json``),
plays 5 episodes from given reset seeds as ``border eval`` does (its documented seed rule, and
on Atari its epsilon draws), and gets ``border eval``'s per-episode returns on those seeds.

The numpy export plays the raw env (``make_env(raw=True)``: for MinAtar ``gymnasium.make`` of the
id after MinAtar's registration) through its ``policy.py``'s ``preprocess``; ONNX and TorchScript
play ``env.py``'s ``make_env()``, whose observations are the network's input.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from border_py import load_policy
from border_py.cli.main import main
from border_py.deploy.export import export_policy

from .conftest import run_isolated

EPISODES = 5
SEED = 1000

PLAY = """
import importlib.util, json
import numpy as np

def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

asked = json.load(open("asked.json"))


def player(out, fmt):  # one export's env, its preprocessing and its policy
    if fmt == "numpy":
        net = load("border_policy", out + "/policy.py").load(out)
        env = net.make_env(raw=True)  # the raw env: preprocess makes the network's input
        return env, net.preprocess, net.preprocess, lambda x: net.predict(x, deterministic=True)[0]
    env_py = load("border_env", out + ".env.py")
    env = env_py.make_env(env_py.load_description(out + ".preprocessing.json"))
    if fmt == "onnx":
        import onnxruntime
        session = onnxruntime.InferenceSession(out, providers=["CPUExecutionProvider"])
        def act(x):
            return session.run(["action"], {"obs": x[None]})[0][0]
    else:
        import torch
        torch.set_num_threads(1)
        model = torch.jit.load(out)
        def act(x):
            with torch.no_grad():
                return model(torch.as_tensor(x[None]))[0].numpy()[0]
    return env, lambda obs: (obs, None), lambda obs, stack: (obs, None), act


def play(env, first, later, act):  # episode i from reset seed S + i, border eval's draws
    start, epsilon, max_steps = asked["seed"], asked["epsilon"], asked["max_steps"]
    n = getattr(env.action_space, "n", None)
    returns = []
    for i in range(asked["episodes"]):
        obs, _ = env.reset(seed=start + i)
        x, stack = first(obs)
        rng = np.random.default_rng((start, i))
        total, steps = 0.0, 0
        while steps < max_steps:
            if epsilon > 0 and rng.random() < epsilon:
                action = env.action_space.start + rng.integers(n)
            else:
                action = act(x)
            obs, reward, terminated, truncated, _ = env.step(action)
            x, stack = later(obs, stack)
            total += float(reward)
            steps += 1
            if terminated or truncated:
                break
        returns.append(total)
    return returns


returns = {fmt: play(*player(out, fmt)) for fmt, out in asked["exports"].items()}
json.dump(returns, open("returns.json", "w"))
"""


def border_eval(run, out) -> tuple[list[float], dict]:
    """``border eval``'s per-episode returns from :data:`SEED`, and its settings."""
    argv = ["eval", str(run), f"eval.n_episodes={EPISODES}", f"eval.seed={SEED}", f"eval.out={out}"]
    assert main(argv) == 0
    (record,) = out.glob("eval_*.json")
    saved = json.loads(record.read_text())
    return saved["episode_returns"], saved["eval"]


PLAYED = ("cartpole", "minatar", "minatar_flicker", "pong")
RUN_OF = {"cartpole": "dqn"}
# The numpy export is played where torch cannot be imported either; ONNX and TorchScript in one
# process that cannot import border-py. CartPole's numpy export is the fast tier's case.
KINDS = {
    "numpy": (("numpy",), ("torch", "border_py")),
    "graphs": (("onnx", "torchscript"), ("border_py",)),
}
CASES = [
    pytest.param(env, kind, marks=() if (env, kind) == ("cartpole", "numpy") else pytest.mark.slow)
    for env in PLAYED
    for kind in KINDS
]
_EVALS: dict[str, tuple[list[float], dict]] = {}


@pytest.mark.parametrize(("env", "kind"), CASES)
def test_an_export_plays_border_evals_episodes_without_border(trained, tmp_path, env, kind):
    if env == "minatar" or env == "minatar_flicker":
        pytest.importorskip("minatar")
    if env == "pong":
        pytest.importorskip("ale_py")
    run = trained(RUN_OF.get(env, env))
    if env not in _EVALS:  # border eval is deterministic: one eval serves both kinds
        _EVALS[env] = border_eval(run, tmp_path / "eval")
    want, settings = _EVALS[env]
    formats, blocked = KINDS[kind]
    exports = {}
    for fmt in formats:
        out = tmp_path / ("export" if fmt == "numpy" else f"policy.{fmt}")
        export_policy(run, fmt, out)
        exports[fmt] = str(out)
    asked = {
        "exports": exports,
        "seed": SEED,
        "episodes": EPISODES,
        "epsilon": settings["epsilon"],
        "max_steps": settings["max_steps"],
    }
    (tmp_path / "asked.json").write_text(json.dumps(asked))
    done = run_isolated(PLAY, tmp_path, blocked, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads((tmp_path / "returns.json").read_text())
    assert got == {fmt: want for fmt in formats}  # episode by episode, on the same reset seeds


def test_a_minatar_export_says_how_to_build_its_env_and_preprocess_its_grid(trained, tmp_path):
    pytest.importorskip("minatar")
    out = export_policy(trained("minatar"), "numpy", tmp_path / "export")
    described = json.loads((out / "preprocessing.json").read_text())
    interface = described["env_interface"]
    assert interface["register"] == [
        {
            "module": "minatar.gym",
            "call": "register_envs",
            "python": "from minatar.gym import register_envs; register_envs()",
        }
    ]
    assert interface["id"] == "MinAtar/Breakout-v1"
    assert interface["kwargs"] == {"sticky_action_prob": 0.1, "difficulty_ramping": True}
    assert [step["op"] for step in interface["steps"]] == ["channels_first"]
    assert "env.reset(seed=S + i)" in described["eval_seeds"]
    readme = (out / "README.txt").read_text()
    assert "from minatar.gym import register_envs; register_envs()" in readme
    assert "channels_first(dtype='uint8') [observation]" in readme

    policy = load_policy(trained("minatar"))
    net = _numpy_policy(out)
    raw = net.make_env(raw=True)
    grid, _ = raw.reset(seed=3)
    assert grid.shape == (10, 10, 4) and grid.dtype == bool  # gymnasium.make's own
    want, _ = policy.make_env().reset(seed=3)
    x, stack = net.preprocess(grid)
    assert stack is None and x.dtype == np.uint8
    np.testing.assert_array_equal(x, want)
    with pytest.raises(ValueError) as refused:  # the raw grid, as a newcomer would pass it
        net.predict(grid, deterministic=True)
    (line,) = str(refused.value).splitlines()
    assert line.startswith("observations of shape (10, 10, 4) and dtype bool: expected uint8")
    assert "preprocess(raw_obs)" in line
    with pytest.raises(ValueError, match=r"^observations of shape \(4, 10, 10\) and dtype bool"):
        net.predict(grid.reshape(4, 10, 10), deterministic=True)


def test_a_frame_stack_is_carried_by_preprocess(trained, tmp_path):
    pytest.importorskip("minatar")
    out = export_policy(trained("minatar_flicker"), "numpy", tmp_path / "export")
    net = _numpy_policy(out)
    steps = net.description["env_interface"]["steps"]
    assert [(s["kind"], s["op"]) for s in steps] == [
        ("observation", "channels_first"),
        ("env", "flicker"),
        ("observation", "frame_stack"),
    ]
    mine, theirs = net.make_env(raw=True), load_policy(trained("minatar_flicker")).make_env()
    obs, _ = mine.reset(seed=4)
    want, _ = theirs.reset(seed=4)
    x, stack = net.preprocess(obs)
    for t in range(30):
        assert x.shape == (8, 10, 10)
        np.testing.assert_array_equal(x, want, err_msg=f"step {t}")
        action = t % 3
        obs, *_ = mine.step(action)
        want, *_ = theirs.step(action)
        x, stack = net.preprocess(obs, stack)


def test_the_bounds_are_numbers(trained, tmp_path):
    out = export_policy(trained("dqn"), "numpy", tmp_path / "export")
    observation = json.loads((out / "preprocessing.json").read_text())["observation"]
    low, high = np.asarray(observation["low"]), np.asarray(observation["high"])
    assert low.dtype == np.float64 and high.dtype == np.float64  # numbers, not strings
    np.testing.assert_array_equal(high, load_policy(trained("dqn")).observation_space.high)
    assert np.isinf(low[1]) and low[1] < 0  # CartPole's unbounded velocity: -Infinity


def test_a_popgym_export_builds_its_one_hot_env(trained, tmp_path):
    out = export_policy(trained("r2d2"), "numpy", tmp_path / "export")
    net = _numpy_policy(out)
    mine, theirs = net.make_env(), load_policy(trained("r2d2")).make_env()
    obs, _ = mine.reset(seed=9)
    want, _ = theirs.reset(seed=9)
    for t in range(10):
        np.testing.assert_array_equal(obs, want, err_msg=f"step {t}")
        obs, *_ = mine.step(t % 2)
        want, *_ = theirs.step(t % 2)


def _numpy_policy(out):
    import importlib.util

    spec = importlib.util.spec_from_file_location("border_policy", out / "policy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load(out)


def _described(**interface) -> dict:
    """An export's description of CartPole-v1 with ``interface``'s entries in place."""
    return {
        "env_interface": {"register": [], "id": "CartPole-v1", "kwargs": {}, "steps": []}
        | {"register": [], **interface}
    }


def test_a_crafted_description_imports_and_calls_nothing_env_py_does_not_write(tmp_path):
    """``preprocessing.json`` is data (a pulled export's too): a wrapper step naming another
    callable, a registration border-py does not write, or a ``module:Env`` id is refused in one
    line before anything is imported or called; trust lets the user's own through."""
    from border_py.deploy import plain_env

    victim = tmp_path / "victim"
    victim.write_text("kept")
    planted = {"_target_": "logging.basicConfig", "filename": str(victim), "filemode": "w"}
    crafted = [
        _described(steps=[{"kind": "env", "op": "wrapper", "args": {**planted, "force": True}}]),
        _described(id="Unregistered-v0", register=[{"module": "os", "call": "getppid"}]),
        _described(id="Unregistered-v0", register=[{"module": "minatar.gym", "call": "exit"}]),
        _described(id="os:Plant-v0"),
        _described(
            steps=[
                {
                    "kind": "env",
                    "op": "wrapper",
                    "args": {
                        "_target_": "gymnasium.wrappers.RecordVideo",
                        "video_folder": str(tmp_path / "v"),
                    },
                }
            ]
        ),
    ]
    for described in crafted:
        with pytest.raises(ValueError, match=r"trust|RecordVideo") as refused:
            plain_env.make_env(described)
        assert "\n" not in str(refused.value)
    assert victim.read_text() == "kept" and not (tmp_path / "v").exists()
    # gymnasium's own wrappers run without trust; a trusted package's wrapper with it
    clip = {
        "kind": "env",
        "op": "wrapper",
        "args": {"_target_": "gymnasium.wrappers.ClipReward", "min_reward": 0.0, "max_reward": 0.5},
    }
    env = plain_env.make_env(_described(steps=[clip]))
    env.reset(seed=0)
    assert env.step(0)[1] == 0.5
    log = tmp_path / "seeds"
    own = {
        "kind": "env",
        "op": "wrapper",
        "args": {"_target_": "tests.seed_log.SeedLog", "path": str(log)},
    }
    with pytest.raises(ValueError, match="trust"):
        plain_env.make_env(_described(steps=[own]))
    assert not log.exists()
    plain_env.make_env(_described(steps=[own]), trust=("tests",)).reset(seed=7)
    assert log.read_text() == "7\n"
