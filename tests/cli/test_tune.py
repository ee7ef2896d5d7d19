"""``border tune``: Optuna search spaces from the config path, parallel trials, pruning, SQLite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
import uuid

import pytest
import yaml

from border_py.errors import ConfigError
from border_py.tuning.space import load_space, search_path
from border_py.tuning.trial import objective_so_far

from ..conftest import BORDER, processes_with_marker, run_border

optuna = pytest.importorskip("optuna", reason="the [tune] extra is not installed")

# A user's config dir: an env option of their own and a search space that uses it. RandomSampler
# with seed 0 draws, for trials 0..3 (seeds 0..3), max_episode_steps 500, 500, 5, 500: episodes
# of at most 5 steps score at most 5 < 6.5 and are pruned at their first evaluation; the others
# score at least 8 (CartPole lasts 8 steps at the least) and complete.
USER_ENV = """
    _target_: border_py.envs.factory.GymEnvFactory
    id: CartPole-v1
    kwargs: {}
    max_episode_steps: null
    wrappers: []
"""
USER_SPACE = """
    n_trials: 4
    n_jobs: 2
    sampler: {_target_: optuna.samplers.RandomSampler, seed: 0}
    pruner: {_target_: optuna.pruners.ThresholdPruner, lower: 6.5}
    overrides:
      - env=my_cartpole
      - trainer=serial
      - trainer.max_opts=300
      - trainer.warmup_period=200
      - trainer.eval_interval=100
      - trainer.eval_episodes=2
      - trainer.save_interval=0
      - agent.hidden_sizes=[16]
    params:
      env.max_episode_steps: {type: categorical, choices: [5, 500]}
      agent.lr: {type: float, low: 1e-4, high: 1e-2, log: true}
"""


def _user_config_dir(tmp_path, space: str = USER_SPACE):
    conf = tmp_path / "my_conf"
    (conf / "env").mkdir(parents=True)
    (conf / "tune").mkdir()
    (conf / "env" / "my_cartpole.yaml").write_text(textwrap.dedent(USER_ENV))
    (conf / "tune" / "tiny.yaml").write_text(textwrap.dedent(space))
    return conf


def test_objective_so_far_matches_train_objectives():
    returns = [10.0, 30.0, 20.0]
    assert objective_so_far("best", returns) == 30.0
    assert objective_so_far("final", returns) == 20.0
    assert objective_so_far("mean", returns) == 20.0


def test_the_shipped_space_and_a_users_space_load_from_the_config_path(tmp_path):
    shipped = load_space("dqn_cartpole", [])
    assert shipped.study_name == "dqn_cartpole" and shipped.params["agent.lr"]["log"] is True
    assert shipped.params["agent.lr"]["low"] == 3e-4  # YAML's 3e-4 read as a number, as Hydra does
    conf = _user_config_dir(tmp_path)
    mine = load_space("tiny", search_path([str(conf)]))
    assert mine.study_name == "tiny" and mine.n_trials == 4 and mine.n_jobs == 2
    assert mine.overrides[0] == "env=my_cartpole"


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (
            "params: {agent.lr: {type: floats, low: 1, high: 2}}",
            "params.agent.lr.type='floats': must be one of float, int, categorical",
        ),
        (
            "params: {agent.lr: {type: float, lo: 1, high: 2}}",
            "params.agent.lr.lo is not an argument of Trial.suggest_float (did you mean 'low'",
        ),
        (
            "params: {agent.lr: {type: float, low: 0, high: 1, log: true}}",
            "tune/tiny.yaml: params.agent.lr: ",
        ),
        (
            "n_trails: 3\nparams: {agent.lr: {type: float, low: 1, high: 2}}",
            "tune/tiny.yaml: unknown key 'n_trails' (did you mean 'n_trials'?)",
        ),
        ("params: {}", "tune/tiny.yaml: params={}: must be a non-empty mapping"),
        (
            "n_jobs: many\nparams: {agent.lr: {type: float, low: 1, high: 2}}",
            "n_jobs='many': must be a positive int or 'auto'",
        ),
    ],
)
def test_a_bad_search_space_is_one_line(tmp_path, space, expected):
    conf = _user_config_dir(tmp_path, space)
    with pytest.raises(ConfigError) as err:
        load_space("tiny", search_path([str(conf)]))
    assert expected in str(err.value) and "\n" not in str(err.value)


@pytest.mark.slow
def test_bad_tune_input_fails_before_any_trial(tmp_path):
    conf = _user_config_dir(tmp_path)
    cases = [
        (
            ["tune", "tny", "--config-dir", str(conf)],
            "tune=tny: no such option (did you mean 'tiny'?)",
        ),
        (["tune", "tiny", "--config-dir", str(tmp_path / "nope")], "--config-dir"),
        (
            ["tune", "tiny", "--config-dir", str(conf), "trainer.eval_interval=0"],
            "trainer.eval_interval=0: must be a positive int",
        ),
        (["tune", "tiny", "--config-dir", str(conf), "agent.lrr=1"], "agent.lrr"),
    ]
    for args, expected in cases:
        out = run_border([*args, "--study-dir", str(tmp_path / "study")], tmp_path, timeout=120)
        assert out.returncode == 2, (args, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert lines[-1].startswith("border: error:") and expected in lines[-1], out.stderr
        assert not (tmp_path / "study").exists()


@pytest.mark.slow
def test_a_pruned_tuning_run_from_a_users_config_dir(tmp_path):
    conf = _user_config_dir(tmp_path)
    study_dir = tmp_path / "study"
    out = run_border(
        ["tune", "tiny", "--config-dir", str(conf), "--study-dir", str(study_dir)],
        tmp_path,
        timeout=500,
    )
    assert out.returncode == 0, out.stderr
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{study_dir / 'study.db'}")
    trials = study.get_trials()
    states = {t.number: t.state for t in trials}
    assert len(trials) == 4
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert pruned and complete and len(pruned) + len(complete) == 4, states
    for trial in pruned:  # stopped at its first evaluation, its run ended gracefully
        assert trial.params["env.max_episode_steps"] == 5
        assert list(trial.intermediate_values) == [100] and trial.intermediate_values[100] <= 5
        result = json.loads((study_dir / "trials" / str(trial.number) / "result.json").read_text())
        assert result["status"] == "completed"
        assert result["summary"]["stopped_by_callback"] and result["summary"]["opt_steps"] == 100
        assert "env=my_cartpole" in result["overrides"]  # composed with the user's own config
    for trial in complete:  # the full run: three evaluations reported, the objective (best)
        assert trial.params["env.max_episode_steps"] == 500
        assert sorted(trial.intermediate_values) == [100, 200, 300]
        run_dir = study_dir / "trials" / str(trial.number)
        summary = json.loads((run_dir / "result.json").read_text())["summary"]
        assert trial.value == summary["objective"] == summary["best_return"] >= 8
        assert summary["opt_steps"] == 300 and (run_dir / "train.log").is_file()
    first_two = sorted(trials, key=lambda t: t.number)[:2]  # n_jobs=2: they ran side by side
    assert first_two[0].datetime_start < first_two[1].datetime_complete
    assert first_two[1].datetime_start < first_two[0].datetime_complete
    best = yaml.safe_load((study_dir / "best.yaml").read_text())
    winner = max(complete, key=lambda t: t.value)
    assert best["best_value"] == winner.value and best["best_trial"] == winner.number
    assert best["best_params"] == winner.params
    assert best["trials"] == {"COMPLETE": len(complete), "PRUNED": len(pruned)}
    assert best["best_command"].startswith("border train env=my_cartpole trainer=serial")
    report = run_border(["report", str(study_dir / "trials")], tmp_path)
    assert report.returncode == 0 and "(4 runs)" in " ".join(report.stdout.split())


@pytest.mark.slow
def test_ctrl_c_stops_the_running_trials_gracefully_and_starts_no_more(tmp_path):
    marker = uuid.uuid4().hex
    study_dir = tmp_path / "study"
    proc = subprocess.Popen(
        [
            *BORDER,
            "tune",
            "dqn_cartpole",
            "--n-trials=3",
            "--n-jobs=2",
            f"--study-dir={study_dir}",
            "trainer=serial",
            "trainer.max_opts=1000000",
            "trainer.eval_interval=200",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "BORDER_TEST_MARKER": marker},
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # wait until both trials have evaluated
            logs = list(study_dir.glob("trials/*/train.log"))
            if len(logs) == 2 and all("eval return" in log.read_text() for log in logs):
                break
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, output
    assert "stopped after 2 of 3 trials" in output
    study = optuna.load_study(
        study_name="dqn_cartpole", storage=f"sqlite:///{study_dir / 'study.db'}"
    )
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.FAIL] * 2
    for number in (0, 1):  # each run stopped gracefully, with its final checkpoint
        result = json.loads((study_dir / "trials" / str(number) / "result.json").read_text())
        assert result["status"] == "interrupted" and result["summary"]["opt_steps"] > 0
        assert list((study_dir / "trials" / str(number) / "checkpoints").glob("0*"))
    assert not (study_dir / "trials" / "2").exists()
    assert yaml.safe_load((study_dir / "best.yaml").read_text())["trials"] == {"FAIL": 2}
    assert not processes_with_marker(marker)
