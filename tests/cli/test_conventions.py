"""Hydra's flags beside border's own: ``--version``, ``--hydra-help``, ``--info`` (with a recipe
looked up), and the line that says a looked-up recipe is in what ``--help``/``--cfg`` show."""

from __future__ import annotations

import pytest
import yaml

from border_py import __version__

from ..conftest import run_border

NOTE = (
    "border: recipe {} applied (looked up by agent={}, env.id={}); values below include it;"
    " experiment=none leaves it out"
)


@pytest.mark.parametrize("args", [["--version"], ["-V"], ["train", "--version"]])
def test_version_is_border_pys(tmp_path, args):
    out = run_border(args, tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"border-py {__version__}\n" and out.stderr == ""


def test_the_top_level_help_names_the_version_flag(tmp_path):
    out = run_border(["--help"], tmp_path, timeout=60)
    assert "-V, --version" in out.stdout and "-sc install=bash" in out.stdout


@pytest.mark.slow
def test_hydra_help_prints_hydras_help_with_the_completion_commands(tmp_path):
    for args in (["--hydra-help"], ["--hydra-help", "agent=sac", "hydra.job.chdir=false"]):
        out = run_border(["train", *args], tmp_path, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("Hydra (1.3.") and out.stderr == ""
        assert 'eval "$(border train -sc install=bash)"' in out.stdout
        assert "hydra/launcher: basic" in out.stdout  # Hydra's own config groups
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "what", ["all", "config", "defaults", "defaults-tree", "plugins", "searchpath"]
)
def test_info_works_beside_the_looked_up_recipe(tmp_path, what):
    out = run_border(["train", "--info", what], tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [NOTE.format("dqn_cartpole", "dqn", "CartPole-v1")]
    if what in ("all", "defaults"):
        assert "experiment/dqn_cartpole" in out.stdout
    if what == "defaults-tree":
        assert "    experiment: dqn_cartpole" in out.stdout
    if what in ("all", "config"):
        assert "max_env_steps: 50000" in out.stdout  # the recipe's
    if what == "plugins":
        assert "BashCompletion" in out.stdout
    if what == "searchpath":
        assert "pkg://hydra.conf" in out.stdout
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_info_with_a_recipe_named_looked_up_by_task_or_none(tmp_path):
    out = run_border(["train", "--info"], tmp_path, timeout=120)  # --info alone: all
    assert out.returncode == 0 and "experiment/dqn_cartpole" in out.stdout, out.stderr
    out = run_border(["train", "--info", "experiment=dqn_acrobot"], tmp_path)  # all, too
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "Defaults List" in out.stdout and "experiment/dqn_acrobot" in out.stdout
    out = run_border(["train", "--info", "config", "experiment=dqn_cartpole"], tmp_path)
    assert out.returncode == 0 and out.stderr == "", out.stderr  # named: nothing looked up
    assert "max_env_steps: 50000" in out.stdout
    out = run_border(["train", "--info", "defaults", "env=gym", "env.id=Acrobot-v1"], tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [NOTE.format("dqn_acrobot", "dqn", "Acrobot-v1")]
    assert "experiment/dqn_acrobot" in out.stdout
    out = run_border(["train", "--info", "defaults", "experiment=none"], tmp_path)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert "experiment/none" in out.stdout and "dqn_cartpole" not in out.stdout


@pytest.mark.slow
def test_help_and_cfg_say_the_recipe_applied(tmp_path):
    out = run_border(["train", "--cfg", "job", "agent=iqn"], tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines() == [NOTE.format("iqn_cartpole", "iqn", "CartPole-v1")]
    cfg = yaml.safe_load(out.stdout)  # stdout stays YAML
    assert cfg["agent"]["_target_"] == "border_py.agents.iqn.IQN"
    assert cfg["trainer"]["max_opts"] == 40000  # the recipe's budget
    out = run_border(["train", "--help"], tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == NOTE.format("dqn_cartpole", "dqn", "CartPole-v1")
    assert lines[1].startswith("border train: train an off-policy RL agent")
    for args in (["experiment=none"], ["experiment=dqn_cartpole"]):
        out = run_border(["train", "--cfg", "job", *args], tmp_path, timeout=120)
        assert out.returncode == 0 and out.stderr == "", out.stderr  # no recipe looked up
    assert not (tmp_path / "outputs").exists()
