"""``border tune``: Optuna search spaces from the config path, parallel trials, pruning, the
study's storage (the journal, an older SQLite file, ``--storage``), best.yaml's command."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest
import yaml

from border_py.errors import ConfigError
from border_py.tuning.space import load_space, search_path
from border_py.tuning.trial import objective_so_far

from ..conftest import BORDER, processes_with_marker, run_border, run_borders

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
      - trainer.final_eval_episodes=2
      - trainer.save_interval=0
      - agent.hidden_sizes=[16]
    params:
      env.max_episode_steps: {type: categorical, choices: [5, 500]}
      agent.lr: {type: float, low: 1e-4, high: 1e-2, log: true}
"""


def _journal(path: Path, name: str):
    """The study ``name`` in the journal file at ``path`` (as optuna-dashboard opens it)."""
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    return optuna.load_study(study_name=name, storage=storage)


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
    calls = [[*args, "--study-dir", str(tmp_path / "study")] for args, _ in cases]
    for (args, expected), out in zip(cases, run_borders(calls, tmp_path, timeout=120), strict=True):
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
    assert not (study_dir / "study.db").exists()  # the journal is the study's storage
    trials = _journal(study_dir / "journal.log", "tiny").get_trials()
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
    assert " experiment=none env=my_cartpole trainer=serial " in best["best_command"]
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
    study = _journal(study_dir / "journal.log", "dqn_cartpole")
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.FAIL] * 2
    for number in (0, 1):  # each run stopped gracefully, with its final checkpoint
        result = json.loads((study_dir / "trials" / str(number) / "result.json").read_text())
        assert result["status"] == "interrupted" and result["summary"]["opt_steps"] > 0
        assert list((study_dir / "trials" / str(number) / "checkpoints").glob("0*"))
    assert not (study_dir / "trials" / "2").exists()
    assert yaml.safe_load((study_dir / "best.yaml").read_text())["trials"] == {"FAIL": 2}
    assert not processes_with_marker(marker)


# Two trials of the tiny budget on the user's own env option: a space that names no experiment.
# `border train env=my_cartpole --config-dir ...` alone would look up the CartPole recipe (DQN on
# CartPole-v1), which the trials did not train with.
REPRO_SPACE = """
    n_trials: 2
    n_jobs: 1
    sampler: {_target_: optuna.samplers.RandomSampler, seed: 0}
    pruner: null
    overrides:
      - env=my_cartpole
      - trainer=serial
      - debug=tiny
      - agent.hidden_sizes=[16]
    params:
      agent.lr: {type: float, low: 1e-4, high: 1e-2, log: true}
      agent.target_update_interval: {type: categorical, choices: [16, 100]}
"""


def _saved_config(run_dir: Path) -> dict:
    """The resolved config of the run's newest checkpoint."""
    (newest,) = sorted((run_dir / "checkpoints").glob("0*"))[-1:]
    return json.loads((newest / "config.json").read_text())


def _differences(a: dict, b: dict, path: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested configs."""
    out = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key, "<absent>"), b.get(key, "<absent>")
        if isinstance(left, dict) and isinstance(right, dict):
            out += _differences(left, right, f"{path}{key}.")
        elif left != right:
            out.append(f"{path}{key}: {left!r} != {right!r}")
    return out


@pytest.mark.slow
def test_best_yamls_command_reruns_the_best_trial_and_the_study_resumes(tmp_path):
    conf = _user_config_dir(tmp_path, REPRO_SPACE)
    study_dir = tmp_path / "study"
    args = ["tune", "tiny", "--config-dir", str(conf), "--study-dir", str(study_dir)]
    out = run_border(args, tmp_path, timeout=500)
    assert out.returncode == 0, out.stderr
    best = yaml.safe_load((study_dir / "best.yaml").read_text())
    assert best["trials"] == {"COMPLETE": 2} and best["storage"] == str(study_dir / "journal.log")
    words = shlex.split(best["best_command"])
    assert words[:2] == ["border", "train"] and "experiment=none" in words
    assert words[2] == f"hydra.searchpath=[file://{conf}]"  # the user's env option is found

    rerun = tmp_path / "rerun"
    out = run_border([*words[1:], f"run_dir={rerun}", "progress=false"], tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    trial_dir = Path(best["best_run_dir"])
    assert trial_dir == study_dir / "trials" / str(best["best_trial"])
    mine, theirs = _saved_config(rerun), _saved_config(trial_dir)
    assert mine["run_dir"] == str(rerun) and theirs["run_dir"] == str(trial_dir)
    assert _differences(mine, theirs) == [f"run_dir: {str(rerun)!r} != {str(trial_dir)!r}"]
    assert theirs["agent"]["lr"] == best["best_params"]["agent.lr"]
    assert theirs["trainer"]["target_return"] is None  # the CartPole recipe's 475 stayed out
    rerun_summary = json.loads((rerun / "result.json").read_text())["summary"]
    assert rerun_summary["objective"] == best["best_value"]  # the serial trainer is exact

    out = run_border([*args, "--n-trials", "1"], tmp_path, timeout=300)  # resume the study
    assert out.returncode == 0, out.stderr
    assert "study tiny (2 trials so far)" in out.stderr
    trials = _journal(study_dir / "journal.log", "tiny").get_trials()
    assert [t.number for t in trials] == [0, 1, 2]
    assert trials[2].state == optuna.trial.TrialState.COMPLETE
    assert (study_dir / "trials" / "2" / "result.json").is_file()
    assert yaml.safe_load((study_dir / "best.yaml").read_text())["trials"] == {"COMPLETE": 3}


@pytest.mark.slow
def test_a_study_dir_with_an_older_sqlite_study_continues_in_it(tmp_path):
    conf = _user_config_dir(tmp_path, REPRO_SPACE)
    study_dir = tmp_path / "study"
    study_dir.mkdir()
    url = f"sqlite:///{study_dir / 'study.db'}"
    older = optuna.create_study(study_name="tiny", storage=url, direction="maximize")
    older.add_trial(  # a trial of an earlier border tune
        optuna.trial.create_trial(
            params={"agent.lr": 1e-3, "agent.target_update_interval": 16},
            distributions={
                "agent.lr": optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True),
                "agent.target_update_interval": optuna.distributions.CategoricalDistribution(
                    [16, 100]
                ),
            },
            value=1000.0,
        )
    )
    args = ["tune", "tiny", "--config-dir", str(conf), "--study-dir", str(study_dir)]
    out = run_border([*args, "--n-trials", "1"], tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert not (study_dir / "journal.log").exists()
    trials = optuna.load_study(study_name="tiny", storage=url).get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    best = yaml.safe_load((study_dir / "best.yaml").read_text())
    assert best["storage"] == url and best["best_trial"] == 0 and best["trials"] == {"COMPLETE": 2}
    # another storage for the same study dir: its trials would run in trials/<n>, refused
    other = tmp_path / "other.journal"
    out = run_border([*args, "--n-trials", "1", "--storage", str(other)], tmp_path, timeout=300)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"border: error: --study-dir {study_dir}: trials/1 is not a trial of study tiny in"
        f" {other} (another study's run dirs are there): give each study its own --study-dir"
    )
    assert sorted(p.name for p in (study_dir / "trials").iterdir()) == ["1"]  # no trial started


@pytest.mark.slow
def test_a_killed_trial_process_is_marked_fail_in_a_journal_given_with_storage(tmp_path):
    conf = _user_config_dir(tmp_path, REPRO_SPACE)
    marker = uuid.uuid4().hex
    study_dir, journal = tmp_path / "study", tmp_path / "elsewhere" / "my.journal"
    journal.parent.mkdir()
    proc = subprocess.Popen(
        [
            *BORDER,
            "tune",
            "tiny",
            f"--config-dir={conf}",
            f"--study-dir={study_dir}",
            f"--storage={journal}",
            "--n-trials=1",
            "trainer.max_opts=1000000",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "BORDER_TEST_MARKER": marker},
    )
    try:
        log = study_dir / "trials" / "0" / "train.log"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # wait until the trial has evaluated
            if log.is_file() and "eval return" in log.read_text():
                break
            time.sleep(0.5)
        trials = [
            child
            for child in psutil.Process(proc.pid).children()
            if "resource_tracker" not in " ".join(child.cmdline())
        ]
        assert len(trials) == 1, trials
        trials[0].kill()  # SIGKILL: the trial records nothing, no heartbeat exists
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output
    assert "trial 0 failed (exit -9), marked FAIL" in output
    assert not (study_dir / "journal.log").exists()
    assert [t.state.name for t in _journal(journal, "tiny").get_trials()] == ["FAIL"]
    best = yaml.safe_load((study_dir / "best.yaml").read_text())
    assert best["storage"] == str(journal) and best["trials"] == {"FAIL": 1}
    assert not processes_with_marker(marker)
