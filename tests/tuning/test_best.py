"""best.yaml: the command that reproduces the best trial's config, and the params' importances."""

from __future__ import annotations

import shlex

import pytest
import yaml
from omegaconf import OmegaConf

from border_py.overrides import parse_overrides
from border_py.tuning.best import MIN_TRIALS_FOR_IMPORTANCE, best_record, reproduce_command
from border_py.tuning.space import compose_train, load_space, override

from ..conftest import run_border

optuna = pytest.importorskip("optuna", reason="the [tune] extra is not installed")

RUN_KEYS = ("run_dir", "progress")  # a trial's own run dir, and no live view in its process


def _diff(a: dict, b: dict, path: str = "") -> list[str]:
    """The keys whose values differ between two configs (nested), as dotted paths."""
    keys = sorted(set(a) | set(b))
    out = []
    for key in keys:
        where = f"{path}{key}"
        if isinstance(a.get(key), dict) and isinstance(b.get(key), dict):
            out += _diff(a[key], b[key], f"{where}.")
        elif a.get(key, "<absent>") != b.get(key, "<absent>"):
            out.append(f"{where}: {a.get(key, '<absent>')!r} != {b.get(key, '<absent>')!r}")
    return out


def test_the_command_composes_the_config_a_trial_of_the_shipped_space_ran(tmp_path):
    """The shipped dqn_cartpole space names no experiment: its trials train without the recipe
    `border train` would look up for DQN on CartPole-v1, and so must the command."""
    space = load_space("dqn_cartpole", [])
    params = {"agent.lr": 0.0012345678901234567, "agent.batch_size": 64, "agent.n_step": 5}
    command = reproduce_command(space.overrides, params, [])
    words = shlex.split(command)
    assert words[:3] == ["border", "train", "experiment=none"]
    trial = compose_train([*space.overrides, *(override(k, v) for k, v in params.items())], [])
    out = run_border([*words[1:], "--cfg", "job"], tmp_path)
    assert out.returncode == 0, out.stderr
    composed = yaml.safe_load(out.stdout)
    expected = OmegaConf.to_container(trial)
    assert _diff(composed, expected) == []
    assert composed["agent"]["lr"] == 0.0012345678901234567  # the float, exactly
    assert composed["agent"]["target_update_interval"] == 32  # the agent's, not the recipe's 50


def test_the_command_names_the_search_path_and_keeps_an_experiment_given(tmp_path):
    odd = tmp_path / "my conf's dir"
    entries = [f"file://{odd}", "pkg://my_pkg.conf"]
    command = reproduce_command(["experiment=dqn_acrobot", "agent.hidden_sizes=[16]"], {}, entries)
    words = shlex.split(command)
    assert words[2].startswith("hydra.searchpath=[")
    assert parse_overrides([words[2]])[0].value() == entries  # Hydra reads them back as given
    assert words[3:] == ["experiment=dqn_acrobot", "agent.hidden_sizes=[16]"]  # no experiment=none
    plain = ["file:///home/me/my-conf_2", "pkg://my_pkg.conf"]  # read unquoted as they are
    command = reproduce_command([], {}, plain)
    assert command == (
        "border train 'hydra.searchpath=[file:///home/me/my-conf_2,pkg://my_pkg.conf]'"
        " experiment=none"
    )
    assert parse_overrides([shlex.split(command)[2]])[0].value() == plain


def _study_with(values: list[tuple[float, float, int]]):
    """An in-memory study with complete trials (lr, batch size) -> value."""
    study = optuna.create_study(study_name="s", direction="maximize")
    dists = {
        "agent.lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True),
        "agent.batch_size": optuna.distributions.CategoricalDistribution([64, 128]),
    }
    for lr, value, batch in values:
        study.add_trial(
            optuna.trial.create_trial(
                params={"agent.lr": lr, "agent.batch_size": batch},
                distributions=dists,
                value=value,
                user_attrs={"run_dir": f"/runs/{len(study.trials)}"},
            )
        )
    return study


def test_best_record_names_the_best_trial_and_ranks_the_params_once_enough_completed():
    # the value follows lr; the batch size alternates and does not matter
    rows = [(10 ** (-4 + 0.4 * i), 100.0 * i, (64, 128)[i % 2]) for i in range(6)]
    few = _study_with(rows[: MIN_TRIALS_FOR_IMPORTANCE - 1])
    record = best_record(few, "/s/journal.log", ["trainer=serial"], [])
    assert record["trials"] == {"COMPLETE": MIN_TRIALS_FOR_IMPORTANCE - 1}
    assert record["best_trial"] == MIN_TRIALS_FOR_IMPORTANCE - 2
    assert record["best_run_dir"] == f"/runs/{MIN_TRIALS_FOR_IMPORTANCE - 2}"
    assert "param_importances" not in record  # too few to rank
    record = best_record(_study_with(rows), "/s/journal.log", ["trainer=serial"], [])
    assert record["best_trial"] == 5 and record["best_value"] == 500.0
    assert record["best_params"] == {"agent.lr": rows[5][0], "agent.batch_size": 128}
    assert record["best_command"] == (
        f"border train experiment=none trainer=serial agent.lr={rows[5][0]} agent.batch_size=128"
    )
    ranked = record["param_importances"]
    assert list(ranked) == ["agent.lr", "agent.batch_size"]  # most important first
    assert ranked["agent.lr"] > 0.5 and sum(ranked.values()) == pytest.approx(1, abs=1e-3)


def test_best_record_hides_a_storage_password_and_says_nothing_best_before_a_completed_trial():
    study = optuna.create_study(study_name="s", direction="maximize")
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))
    record = best_record(study, "postgresql://me:hunter2@db/optuna", [], [])
    assert record == {
        "study": "s",
        "storage": "postgresql://me:***@db/optuna",
        "trials": {"FAIL": 1},
    }
