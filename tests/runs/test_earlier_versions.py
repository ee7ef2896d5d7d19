"""Runs of earlier versions under this one: the run dirs border-py 0.2.0 wrote (``tests/fixtures``,
never regenerated) evaluate, load as policies and resume, through the one table of moved
``_target_`` values (``runs/compat.py``); what they save from then on names the current classes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from border_py import __version__, load_policy
from border_py.cli.eval import evaluate_checkpoint
from border_py.config import resolve_target
from border_py.errors import ConfigError
from border_py.runs.checkpoint import load_checkpoint
from border_py.runs.compat import MOVED_TARGETS, current_targets
from border_py.runs.trust import Trust, imports, shipped_targets

from ..conftest import run_border

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNS = ("run_0_2", "async_0_2")  # serial with its replay buffer; async
TRAINERS = {  # each run's trainer and actors, as this version names them
    "run_0_2": "border_py.trainers.serial.SerialSettings",
    "async_0_2": "border_py.trainers.async_trainer.AsyncSettings",
}
LOCAL_ACTORS = "border_py.actors.local.LocalActorSettings"


@pytest.fixture(params=RUNS)
def earlier(request, tmp_path) -> Path:
    """A copy of a run dir that border-py 0.2.0 wrote (the fixture itself stays as it is)."""
    copy = tmp_path / request.param
    shutil.copytree(FIXTURES / request.param, copy, symlinks=True)
    return copy


def _saved_targets(checkpoint: Path) -> set[str]:
    """What a checkpoint's ``config.json`` imports, as written on disk."""
    return {
        target for _, _, target in imports(json.loads((checkpoint / "config.json").read_text()))
    }


def test_the_fixtures_hold_the_names_0_2_saved(earlier):
    """The runs stand for what users have: 0.2.0's meta and class names (the test of the rest
    would prove nothing with today's names in them)."""
    for checkpoint in (earlier / "checkpoints").iterdir():
        assert json.loads((checkpoint / "meta.json").read_text())["border_py"] == "0.2.0"
        assert _saved_targets(checkpoint) & set(MOVED_TARGETS), checkpoint


def test_a_0_2_run_loads_with_the_current_names_and_passes_the_trust_gate(earlier):
    checkpoint = load_checkpoint(earlier)
    assert checkpoint.config["trainer"]["_target_"] == TRAINERS[earlier.name]
    assert checkpoint.config["actor_manager"]["_target_"] == LOCAL_ACTORS
    targets = {target for _, _, target in imports(checkpoint.config)}
    assert not targets & set(MOVED_TARGETS) and targets <= shipped_targets()
    Trust().check(checkpoint.config, checkpoint.path / "config.json")  # nothing to trust
    assert checkpoint.state.opt_steps == 300  # trainer.pt, typed


def test_without_the_aliases_the_trust_gate_would_refuse_a_0_2_run(earlier):
    """The aliases apply before the gate: 0.2's names are no shipped component's any more."""
    saved = json.loads((earlier / "checkpoints" / "000000300" / "config.json").read_text())
    with pytest.raises(ConfigError, match="a saved run may import only border-py's"):
        Trust().check_imports(saved, earlier / "config.json")


def test_a_0_2_run_loads_as_a_policy_that_acts(earlier):
    policy = load_policy(earlier)
    assert policy.config["trainer"]["_target_"] == TRAINERS[earlier.name]
    obs, _ = policy.make_env().reset(seed=0)
    action, _ = policy.predict(obs, deterministic=True)
    assert policy.action_space.contains(np.asarray(action).item())


def test_a_0_2_run_evaluates(earlier):
    checkpoint, _, result, _, _ = evaluate_checkpoint(str(earlier), ["eval.n_episodes=2"])
    assert checkpoint.path == earlier / "checkpoints" / "best"
    assert len(result.episode_returns) == 2


@pytest.mark.slow
def test_border_eval_plays_a_0_2_run(earlier):
    out = run_border(["eval", str(earlier), "eval.n_episodes=2"], earlier.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("written: ")


@pytest.mark.slow
def test_a_0_2_run_resumes_its_counters_and_saves_the_current_names(earlier):
    saved = load_checkpoint(earlier / "checkpoints" / "000000300")
    out = run_border(
        ["train", f"resume={earlier}", "trainer.max_opts=400", "progress=false"], earlier.parent
    )
    assert out.returncode == 0, out.stderr
    checkpoint = earlier / "checkpoints" / "000000400"
    resumed = load_checkpoint(checkpoint)
    state = resumed.state
    assert state.opt_steps == 400
    assert state.env_steps > saved.state.env_steps and state.samples > saved.state.samples
    assert state.eval_returns[: len(saved.state.eval_returns)] == saved.state.eval_returns
    assert len(state.eval_returns) > len(saved.state.eval_returns)
    assert state.seconds > saved.state.seconds
    slots = saved.state.actors.get("actors")  # the async run's actor slots go on counting
    if slots is not None:
        assert [s["received"] for s in state.actors["actors"]] > [s["received"] for s in slots]
    else:  # the serial run's actor restored its envs, and its buffer went on
        assert state.actors["actor"]["env_steps"] > saved.state.actors["actor"]["env_steps"]
        assert "resuming without a replay buffer" not in out.stderr
    meta = json.loads((checkpoint / "meta.json").read_text())
    assert meta["border_py"] == __version__ and meta["opt_steps"] == 400
    on_disk = _saved_targets(checkpoint)
    assert {TRAINERS[earlier.name], LOCAL_ACTORS} <= on_disk
    assert not on_disk & set(MOVED_TARGETS)
    summary = json.loads((earlier / "result.json").read_text())["summary"]
    assert summary["opt_steps"] == 400 and summary["env_steps"] == state.env_steps


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_TARGETS.items()))
def test_each_moved_target_names_where_its_class_is_now(old, new):
    saved = {"actor_manager": {"_target_": old, "n_actors": 2}, "list": [{"_target_": old}]}
    assert current_targets(saved) == {
        "actor_manager": {"_target_": new, "n_actors": 2},
        "list": [{"_target_": new}],
    }
    assert isinstance(resolve_target(new), type)
    assert new not in MOVED_TARGETS  # each maps to where it is now, not to another old name


def test_the_aliases_leave_the_rest_of_a_config_as_it_was():
    config = {"trainer": {"_target_": "my_pkg.MyTrainerSettings", "_target_x": 1}, "seed": [1]}
    assert current_targets(config) == config
    assert current_targets({"_target_": ["not", "a", "name"]}) == {"_target_": ["not", "a", "name"]}


def test_the_shipped_configs_name_no_moved_target():
    assert not shipped_targets() & set(MOVED_TARGETS)
