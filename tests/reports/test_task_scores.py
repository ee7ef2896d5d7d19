"""Which score ranks runs across tasks and in ``--export-scores``: every scored run's
``final_eval`` (the final weights on fresh episodes) when each has one, else every run's
``final_return`` (the last selection evaluation), named wherever the numbers appear."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from border_py.cli.main import main
from border_py.reports.aggregate import group_runs
from border_py.reports.collect import collect
from border_py.reports.tasks import (
    FINAL_EVAL,
    FINAL_RETURN,
    RUN_RANGE,
    aggregate_tasks,
    configurations,
    run_scores,
    task_scales,
)

from .synthetic import add_fresh, make_run, make_sweep

# selection evaluations end at 100, 200 (CartPole-v1) and 0, 1000 (MyEnv-v0, not in the table);
# the final evaluations say 261.85, 500 (normalised 0.5, 1.0: random 23.7, target 500) and
# 10, 30 (normalised by their own range: 0, 1)
CELLS = {
    ("CartPole-v1", "1e-3"): [[50.0, 100.0], [50.0, 200.0]],
    ("MyEnv-v0", "1e-3"): [[50.0, 0.0], [50.0, 1000.0]],
}
FRESH = [23.7 + 0.5 * 476.3, 500.0, 10.0, 30.0]  # per job 0..3


@pytest.fixture
def sweep(tmp_path):
    root = make_sweep(tmp_path / "sweep", CELLS, "agent.lr")
    for job, final in enumerate(FRESH):
        add_fresh(root / str(job), final, final)
    return root


def _across(root, tmp_path, capsys):
    """``border report`` of ``root`` with a CSV and scores: its output (whitespace joined), the
    CSV's across-task line and the scores file."""
    csv_path, npz = tmp_path / "g.csv", tmp_path / "s.npz"
    assert main(["report", str(root), "--csv", str(csv_path), "--export-scores", str(npz)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    lines = list(csv.DictReader(csv_path.open()))
    (across,) = [line for line in lines if "(normalised" in line["env_id"]]
    return out, across, np.load(npz, allow_pickle=False)


def test_with_a_final_eval_on_every_run_the_aggregate_and_export_use_it(sweep, tmp_path, capsys):
    # a failed run without any evaluation is not scored: it does not force the fallback
    overrides = ["env=gym", "env.id=CartPole-v1", "agent.lr=1e-3", "seed=2"]
    failed = make_run(sweep / "4", overrides, "CartPole-v1", [1.0])
    (failed / "result.json").write_text(json.dumps({"status": "failed", "overrides": overrides}))
    shutil.rmtree(failed / "tensorboard")

    groups = group_runs(collect(sweep)[1])[0]
    assert [len(g.runs) for g in groups] == [3, 2]
    scores = run_scores(groups)
    assert scores.name == FINAL_EVAL
    scales = task_scales(groups, scores)
    assert scales["MyEnv-v0"] == (10.0, 30.0, RUN_RANGE)  # the range of the final evaluations
    found = aggregate_tasks(configurations(groups)[0], scales, scores)
    assert found is not None and (found.score, found.runs) == (FINAL_EVAL, 4)
    assert found.mean == pytest.approx((0.75 + 0.5) / 2)  # CartPole 0.5, 1; MyEnv 0, 1
    assert found.iqm == pytest.approx(0.75)  # of 0, 0.5, 1, 1: the middle two

    out, across, data = _across(sweep, tmp_path, capsys)
    assert "across tasks: normalised final eval, the final weights on fresh episodes" in out
    assert "MyEnv-v0: 0 = 10, 1 = 30 (range of its runs)" in out
    assert across["env_id"] == "CartPole-v1 MyEnv-v0 (normalised final_eval)"
    assert float(across["final_eval_mean"]) == pytest.approx(0.625)
    assert float(across["final_eval_iqm"]) == pytest.approx(0.75)
    assert across["final_eval_interval"] == "95% stratified bootstrap"
    assert across["final_mean"] == ""  # not put under the selection score's name
    assert str(data["score"]) == "final_eval"
    assert data["final_0"].tolist() == [[FRESH[0], 10.0], [500.0, 30.0]]
    assert data["normalized_0"] == pytest.approx(np.array([[0.5, 0.0], [1.0, 1.0]]))
    assert data["scale"].tolist() == [[23.7, 500.0], [10.0, 30.0]]


def test_one_run_without_a_final_eval_puts_every_run_on_its_final_return(sweep, tmp_path, capsys):
    path = sweep / "3" / "result.json"
    record = json.loads(path.read_text())
    del record["summary"]["final_eval"], record["summary"]["best_eval"]
    path.write_text(json.dumps(record))

    groups = group_runs(collect(sweep)[1])[0]
    scores = run_scores(groups)
    assert scores.name == FINAL_RETURN
    assert sorted(scores.values.values()) == [0.0, 100.0, 200.0, 1000.0]
    assert task_scales(groups, scores)["MyEnv-v0"] == (0.0, 1000.0, RUN_RANGE)

    out, across, data = _across(sweep, tmp_path, capsys)
    cartpole = [(100.0 - 23.7) / 476.3, (200.0 - 23.7) / 476.3]
    assert "across tasks: normalised final return, the last selection evaluation" in out
    assert "MyEnv-v0: 0 = 0, 1 = 1000 (range of its runs)" in out
    assert across["env_id"] == "CartPole-v1 MyEnv-v0 (normalised final_return)"
    assert float(across["final_mean"]) == pytest.approx((sum(cartpole) / 2 + 0.5) / 2)
    assert float(across["final_iqm"]) == pytest.approx(sum(cartpole) / 2)  # middle two
    assert across["final_eval_mean"] == ""
    assert str(data["score"]) == "final_return"
    assert data["final_0"].tolist() == [[100.0, 0.0], [200.0, 1000.0]]
    assert data["normalized_0"] == pytest.approx(np.array([[cartpole[0], 0.0], [cartpole[1], 1.0]]))
