"""Hydra's flags beside border's own: ``--version``, ``--hydra-help``, ``--info`` (with a recipe
looked up), and the line that says a looked-up recipe is in what ``--help``/``--cfg`` show."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from border_py import __version__

from ..conftest import run_border, run_borders

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
    calls = [["--hydra-help"], ["--hydra-help", "agent=sac", "hydra.job.chdir=false"]]
    for out in run_borders([["train", *args] for args in calls], tmp_path, timeout=120):
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("Hydra (1.3.") and out.stderr == ""
        assert 'eval "$(border train -sc install=bash)"' in out.stdout
        assert "hydra/launcher: basic" in out.stdout  # Hydra's own config groups
    assert not (tmp_path / "outputs").exists()


INFO = ["all", "config", "defaults", "defaults-tree", "plugins", "searchpath"]


@pytest.fixture(scope="module")
def info_shown(tmp_path_factory) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    """The dir of ``border train --info <what>`` of every ``what`` in :data:`INFO`, run two at a
    time, and what each printed."""
    cwd = tmp_path_factory.mktemp("info")
    outs = run_borders([["train", "--info", what] for what in INFO], cwd, timeout=120)
    return cwd, dict(zip(INFO, outs, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("what", INFO)
def test_info_works_beside_the_looked_up_recipe(info_shown, what):
    cwd, shown = info_shown
    out = shown[what]
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
    assert not (cwd / "outputs").exists()


@pytest.mark.slow
def test_info_with_a_recipe_named_looked_up_by_task_or_none(tmp_path):
    alone, acrobot, named, looked_up, none = run_borders(
        [
            ["train", "--info"],  # --info alone: all
            ["train", "--info", "experiment=dqn_acrobot"],  # all, too
            ["train", "--info", "config", "experiment=dqn_cartpole"],
            ["train", "--info", "defaults", "env=gym", "env.id=Acrobot-v1"],
            ["train", "--info", "defaults", "experiment=none"],
        ],
        tmp_path,
        timeout=120,
    )
    assert alone.returncode == 0 and "experiment/dqn_cartpole" in alone.stdout, alone.stderr
    assert acrobot.returncode == 0 and acrobot.stderr == "", acrobot.stderr
    assert "Defaults List" in acrobot.stdout and "experiment/dqn_acrobot" in acrobot.stdout
    assert named.returncode == 0 and named.stderr == "", named.stderr  # named: nothing looked up
    assert "max_env_steps: 50000" in named.stdout
    assert looked_up.returncode == 0, looked_up.stderr
    assert looked_up.stderr.splitlines() == [NOTE.format("dqn_acrobot", "dqn", "Acrobot-v1")]
    assert "experiment/dqn_acrobot" in looked_up.stdout
    assert none.returncode == 0 and none.stderr == "", none.stderr
    assert "experiment/none" in none.stdout and "dqn_cartpole" not in none.stdout


@pytest.mark.slow
def test_help_and_cfg_say_the_recipe_applied(tmp_path):
    iqn, shown, *named = run_borders(
        [
            ["train", "--cfg", "job", "agent=iqn"],
            ["train", "--help"],
            ["train", "--cfg", "job", "experiment=none"],
            ["train", "--cfg", "job", "experiment=dqn_cartpole"],
        ],
        tmp_path,
        timeout=120,
    )
    assert iqn.returncode == 0, iqn.stderr
    assert iqn.stderr.splitlines() == [NOTE.format("iqn_cartpole", "iqn", "CartPole-v1")]
    cfg = yaml.safe_load(iqn.stdout)  # stdout stays YAML
    assert cfg["agent"]["_target_"] == "border_py.agents.iqn.IQN"
    assert cfg["trainer"]["max_opts"] == 40000  # the recipe's budget
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == NOTE.format("dqn_cartpole", "dqn", "CartPole-v1")
    assert lines[1].startswith("border train: train an off-policy RL agent")
    for out in named:
        assert out.returncode == 0 and out.stderr == "", out.stderr  # no recipe looked up
    assert not (tmp_path / "outputs").exists()
