"""The ``border`` command in subprocesses: help, --cfg, a short run's artifacts, multirun, bad input."""

from __future__ import annotations

import json

import pytest
import torch

from ..conftest import FEW_FRESH_EVALS, run_border, run_borders, scalar_tags

SHORT = [
    "experiment=none",  # the command line under test, not the recipe the lookup would add
    "trainer=serial",
    "trainer.max_opts=300",
    "trainer.warmup_period=100",
    "trainer.eval_interval=100",
    "trainer.eval_episodes=2",
    "trainer.record_interval=50",
    "trainer.save_interval=200",
    "agent.hidden_sizes=[32]",
    FEW_FRESH_EVALS,
]
TAGS = {
    "eval/return_mean",
    "eval/return_std",
    "train/loss",
    "train/q_mean",
    "train/epsilon",
    "perf/env_steps",
    "perf/env_steps_per_sec",
    "perf/opt_steps_per_sec",
    "buffer/size",
}


def test_top_level_help_lists_subcommands_with_examples(tmp_path):
    out = run_border(["--help"], tmp_path)
    assert out.returncode == 0
    assert "train" in out.stdout and "border train -m" in out.stdout


@pytest.mark.slow
def test_train_help_lists_groups_and_options(tmp_path):
    out = run_border(["train", "--help"], tmp_path)
    assert out.returncode == 0, out.stderr
    for text in (
        "agent: custom, dqn, iqn, r2d2, sac",
        "env: atari, cartpole, gym, minatar, mujoco, pendulum, popgym",
        "replay_buffer: prioritized, sequence, sequence_prioritized, uniform",
        "trainer: async, serial",
        "actor_manager: default, ray",
        "recorder: both, mlflow, tensorboard, wandb",
        "experiment: dqn_acrobot, dqn_cartpole",
        "debug: tiny",
        "max_opts",
    ):
        assert text in out.stdout
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_debug_tiny_is_a_smoke_run_over_the_looked_up_recipe(tmp_path):
    out = run_border(["train", "debug=tiny"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "recipe experiment=dqn_cartpole" in out.stderr  # the overlay is composed after it
    (run_dir,) = (tmp_path / "outputs").glob("*/*")
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "completed" and result["summary"]["opt_steps"] == 300
    assert [step for step, _ in scalar_tags(run_dir)["eval/return_mean"]] == [150, 300]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["000000300", "best"]


@pytest.mark.slow
def test_cfg_job_prints_the_composed_config(tmp_path):
    out = run_border(["train", "--cfg", "job", "agent.lr=0.01"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "lr: 0.01" in out.stdout and "_target_: border_py.agents.dqn.DQN" in out.stdout


@pytest.mark.slow
def test_a_short_run_writes_tensorboard_and_checkpoints_into_the_run_dir(tmp_path):
    out = run_border(["train", "seed=3", *SHORT], tmp_path)
    assert out.returncode == 0, out.stderr
    (run_dir,) = (tmp_path / "outputs").glob("*/*")
    assert (run_dir / ".hydra" / "config.yaml").is_file()
    assert (run_dir / "train.log").read_text().count("eval return") == 3
    tags = scalar_tags(run_dir)
    assert set(tags) >= TAGS
    assert [step for step, _ in tags["eval/return_mean"]] == [100, 200, 300]
    assert [step for step, _ in tags["train/loss"]] == [50, 100, 150, 200, 250, 300]
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints == ["000000200", "000000300", "best"]
    best_meta = json.loads((run_dir / "checkpoints" / "best" / "meta.json").read_text())
    assert best_meta["eval"]["eval/return_mean"] == max(v for _, v in tags["eval/return_mean"])
    policy = torch.load(run_dir / "checkpoints" / "best" / "policy.pt", weights_only=True)
    assert policy["1.weight"].shape == (32, 4)
    agent = torch.load(run_dir / "checkpoints" / "000000300" / "agent.pt", weights_only=True)
    assert agent["opt_steps"] == 300


@pytest.mark.slow
def test_multirun_runs_every_job_in_the_sweep_dir(tmp_path):
    out = run_border(
        [
            "train",
            "-m",
            "seed=0,1",
            *SHORT[:2],
            "trainer.max_opts=100",
            "trainer.eval_interval=100",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    assert out.stderr.strip().splitlines()[-1] == (
        f"border: 2 jobs, 2 completed, 0 failed; compare them: border report {sweep.relative_to(tmp_path)}"
    )
    for job in ("0", "1"):
        assert (sweep / job / "checkpoints" / "best" / "policy.pt").is_file()
        assert "eval/return_mean" in scalar_tags(sweep / job)


@pytest.mark.slow
def test_bad_input_fails_fast_with_one_line_and_writes_nothing(tmp_path):
    cases = [
        (["agent=nope"], "agent=nope"),
        (["agent.lr=-1"], "agent.lr=-1"),
        (["env=gym", "env.id=NoSuchEnv-v0"], "env.id='NoSuchEnv-v0'"),
        (["trainer.warmup_period=500000"], "trainer.warmup_period=500000"),
        (
            ["trainer=serial", "trainer.max_env_steps=300", "trainer.warmup_period=1000"],
            "trainer.warmup_period=1000: must be below trainer.max_env_steps=300",
        ),
    ]
    outs = run_borders([["train", *args] for args, _ in cases], tmp_path, timeout=60)
    for (args, key), out in zip(cases, outs, strict=True):
        assert out.returncode == 2, (args, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and key in lines[0], out.stderr
    assert not (tmp_path / "outputs").exists()


def test_unknown_command(tmp_path):
    out = run_border(["trian"], tmp_path)
    assert out.returncode == 2 and "did you mean 'train'" in out.stderr


def without_ale_py(tmp_path):
    """An environment in which ``import ale_py`` fails, as if the [atari] extra were missing."""
    shim = tmp_path / "shim" / "ale_py"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ale_py'\", name='ale_py')\n"
    )
    return {"PYTHONPATH": str(shim.parent)}


@pytest.mark.slow
def test_cfg_info_and_help_never_build_an_env(tmp_path):
    pong = ["train", "experiment=dqn_pong_async"]
    trained, cfg, info, shown, checked = run_borders(
        [
            pong,
            [*pong, "--cfg", "job"],
            [*pong, "--info", "config"],
            [*pong, "--help"],
            ["train", "--cfg", "job", "experiment=dqn_pong_async", "agent.lrr=1"],  # still checked
        ],
        tmp_path,
        env=without_ale_py(tmp_path),
    )
    assert trained.returncode == 2 and "Atari needs the atari extra" in trained.stderr  # the shim
    assert cfg.returncode == 0, cfg.stderr
    assert "id: ALE/Pong-v5" in cfg.stdout and "_target_: border_py.agents.dqn.DQN" in cfg.stdout
    assert info.returncode == 0 and "id: ALE/Pong-v5" in info.stdout, info.stderr
    assert shown.returncode == 0 and "id: ALE/Pong-v5" in shown.stdout, shown.stderr
    assert checked.returncode == 2
    assert checked.stderr.strip().splitlines() == [
        "border: error: agent.lrr: unknown key 'lrr' in agent (did you mean 'lr'?);"
        " border_py.agents.dqn.DQN takes: hidden_sizes, network, dueling, lr, adam_eps, gamma, n_step,"
        " batch_size, double_dqn, loss, max_grad_norm, target_update_interval, tau, eps_start,"
        " eps_final, eps_decay_steps, compile, compile_mode"
    ]
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_a_null_key_is_deleted_on_the_command_line(tmp_path):
    out = run_border(["train", "experiment=none", "~agent.tau", "--cfg", "job"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert "target_update_interval: 32" in out.stdout and "tau:" not in out.stdout
