"""The MinAtar side by side with SB3 (``benchmarks/time_to_solve.py --sb3
experiment=dqn_minatar_breakout``): SB3's DQN is given the recipe's own numbers, border's
Q-network layer for layer, settings it cannot run are refused in one line before anything runs,
and the driver runs both at a tiny budget to per-seed ratios. Skipped without the ``[bench]``
(stable-baselines3) and ``[minatar]`` extras."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from border_py.agents.dqn import DQN
from border_py.envs.factory import build_env_factory
from border_py.errors import ConfigError

from ..conftest import REPO

pytest.importorskip("stable_baselines3")
pytest.importorskip("minatar")

DRIVER = [sys.executable, "benchmarks/time_to_solve.py"]
MINATAR = "experiment=dqn_minatar_breakout"


@pytest.fixture
def baseline(monkeypatch: pytest.MonkeyPatch):
    """``benchmarks/sb3_dqn_minatar.py`` as a module."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    return importlib.import_module("sb3_dqn_minatar")


def test_sb3_is_given_the_recipes_numbers(baseline):
    from stable_baselines3.common.buffers import NStepReplayBuffer
    from stable_baselines3.common.type_aliases import TrainFreq, TrainFrequencyUnit

    config = baseline.recipe(["trainer.target_return=5"])
    settings = baseline.sb3_settings(config)
    envs = build_env_factory(config)
    model = baseline.build_model(settings, envs.make(training=True), seed=0)
    # the recipe: lr 1e-3, batch 64, replay 100k, warm-up 5000, batch / replay_ratio = 64 / 1 =
    # 64 env steps per opt step, a target copy every 125 opt steps = 8000 env steps, epsilon 1 ->
    # 0.1 over 100k of the 500k env steps, 3-step returns, clip 10, Adam's eps 1e-8
    assert (model.learning_rate, model.batch_size, model.buffer_size) == (1e-3, 64, 100_000)
    assert (model.learning_starts, model.gamma, model.n_steps) == (5000, 0.99, 3)
    assert model.train_freq == TrainFreq(64, TrainFrequencyUnit.STEP)
    assert (model.gradient_steps, model.target_update_interval) == (1, 8000)
    assert isinstance(model.replay_buffer, NStepReplayBuffer)
    assert (model.replay_buffer.n_steps, model.replay_buffer.gamma) == (3, 0.99)
    epsilon = model.exploration_schedule  # of the run's remaining share
    assert [epsilon(1 - steps / 500_000) for steps in (0, 50_000, 100_000, 150_000)] == (
        pytest.approx([1.0, 0.55, 0.1, 0.1])
    )
    assert model.max_grad_norm == 10.0 and not model.policy.normalize_images
    (group,) = model.policy.optimizer.param_groups
    assert type(model.policy.optimizer) is torch.optim.Adam
    assert (group["lr"], group["eps"]) == (1e-3, 1e-8)
    assert {
        k: settings[k] for k in ("total_timesteps", "eval_every", "eval_episodes", "target")
    } == {
        "total_timesteps": 500_000,
        "eval_every": 10_000,
        "eval_episodes": 20,
        "target": 5,
    }
    assert any("double_dqn" in line for line in settings["unmatched"])
    # border's Q-network, layer for layer: its weights in SB3's net give its Q-values
    space, actions = envs.spaces()
    agent = config["agent"]
    border = DQN(space, actions, **{k: v for k, v in agent.items() if k != "_target_"}).q
    ours, theirs = list(border.parameters()), list(model.q_net.parameters())
    assert [p.shape for p in ours] == [p.shape for p in theirs]  # 16 3x3 filters, 1024->128->3
    with torch.no_grad():
        for p_sb3, p in zip(theirs, ours, strict=True):
            p_sb3.copy_(p)
        grids = np.random.default_rng(0).integers(0, 2, (5, *space.shape), dtype=np.uint8)
        expected = border(torch.as_tensor(grids))
        got = model.q_net(model.policy.obs_to_tensor(grids)[0])
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize(
    ("overrides", "train_freq", "gradient_steps", "target_period"),
    [
        (["trainer.replay_ratio=16"], 4, 1, 500),  # batch 64: 4 env steps per opt step
        (["trainer.replay_ratio=2"], 32, 1, 4000),
        # 2 opt steps per env step: a target copy every 250 of them, 125 env steps
        (["trainer.replay_ratio=128", "agent.target_update_interval=250"], 1, 2, 125),
        (["trainer=serial", "trainer.replay_ratio=null", "trainer.opt_interval=1"], 1, 1, 125),
    ],
)
def test_the_update_and_target_periods_follow_the_recipe(
    baseline, overrides, train_freq, gradient_steps, target_period
):
    config = baseline.recipe(["trainer.target_return=5", *overrides])
    dqn = baseline.sb3_settings(config)["dqn"]
    got = (dqn["train_freq"], dqn["gradient_steps"], dqn["target_update_interval"])
    assert got == (train_freq, gradient_steps, target_period)


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["trainer.replay_ratio=10"], "trainer.replay_ratio"),  # 6.4 env steps per opt step
        (["trainer.replay_ratio=128", "agent.target_update_interval=3"], "agent.target_update"),
        (["agent.dueling=true"], "agent.dueling"),
        (["agent.loss=mse"], "agent.loss"),
        (["agent.tau=0.005"], "agent.tau"),
        (["replay_buffer=prioritized"], "replay_buffer._target_"),
        (["agent=iqn"], "agent._target_"),
    ],
)
def test_what_sb3_cannot_run_is_refused(baseline, overrides, key):
    config = baseline.recipe(["trainer.target_return=5", *overrides])
    with pytest.raises(ConfigError, match=key):
        baseline.sb3_settings(config)


@pytest.mark.parametrize("words", [[], ["experiment=dqn_cartpole"], ["experiment=iqn_cartpole"]])
def test_the_cartpole_recipes_keep_rl_zoos_baseline(monkeypatch, tmp_path, words):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    driver = importlib.import_module("time_to_solve")
    command = driver.sb3_command("python", [*words, "trainer=serial"], tmp_path)
    assert command == ["python", str(REPO / "benchmarks" / "sb3_dqn_cartpole.py")]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (["experiment=dqn_pong"], "--sb3: no SB3 baseline for experiment=dqn_pong"),
        ([MINATAR], "trainer.target_return=None: must be set"),  # the recipe has no target
    ],
)
def test_the_driver_refuses_before_any_run(words, expected):
    done = subprocess.run(
        [*DRIVER, "--seeds", "3", "--sb3", *words],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # no row: border never ran
    (line,) = done.stderr.strip().splitlines()
    assert expected in line


@pytest.mark.slow
def test_the_driver_runs_both_to_per_seed_ratios():
    tiny = [
        "trainer.max_env_steps=2000",  # room for the evaluation at 500 to come back (async)
        "trainer.warmup_period=100",
        "trainer.eval_env_interval=500",
        "trainer.eval_episodes=1",
        "trainer.final_eval_episodes=2",
    ]
    done = subprocess.run(
        [*DRIVER, "--seeds", "3", "--sb3", "--target", "0", MINATAR, *tiny],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    settings = json.loads(lines[0].removeprefix("SETTINGS "))  # the overrides reached SB3
    budget = (settings["total_timesteps"], settings["eval_every"], settings["eval_episodes"])
    assert budget == (2000, 500, 1) and settings["target"] == 0
    assert settings["dqn"]["learning_starts"] == 100
    border_row = lines[1].split()  # its first evaluation's, at or after 500 (async: in flight)
    assert border_row[:3] == ["border", "seed", "3:"] and int(border_row[3]) >= 500
    assert lines[2].startswith("SB3    seed 3:     500 env steps")
    result = json.loads(lines[-1].removeprefix("RESULT "))
    ratio = result["wall_ratio_by_seed"]["3"]
    shown = [x for x in lines if x.startswith("seed 3: whole process, border / SB3: ")]
    assert len(shown) == 1 and shown[0].endswith("x")  # two decimals of the RESULT's three
    assert float(shown[0].rsplit(" ", 1)[1][:-1]) == pytest.approx(ratio, abs=0.0051)
    assert result["border_solved"] == result["sb3_solved"] == 1
    assert result["wall_ratio_max"] == ratio > 0
    walls = result["border_median_wall_s"] / result["sb3_median_wall_s"]  # one seed: its walls
    assert ratio == pytest.approx(walls, abs=2e-3)
