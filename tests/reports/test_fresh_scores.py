"""``border report`` shows result.json's final evaluations on fresh episodes (``final_eval``,
``best_eval``) beside the selection evaluations' returns, per run and per group of seeds."""

from __future__ import annotations

import csv
import json

import pytest

from border_py.cli.main import main

from .synthetic import add_fresh, make_run


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "sweep"
    for seed, (final, best) in enumerate([(280.0, 290.0), (300.0, 310.0)]):
        run = make_run(root / str(seed), [f"seed={seed}"], "CartPole-v1", [100.0, 400.0, 350.0])
        add_fresh(run, final, best)
    make_run(root / "2", ["seed=2"], "CartPole-v1", [100.0, 200.0])  # before final evaluations
    return root


def test_the_runs_table_and_csv_carry_the_fresh_scores_beside_the_selection_ones(
    runs, tmp_path, capsys
):
    assert main(["report", str(runs), "--runs", "--csv", str(tmp_path / "r.csv")]) == 0
    out = capsys.readouterr().out
    assert "280.0 ± 5.0 (100)" in out and "310.0 ± 1.5 (100)" in out
    lines = list(csv.DictReader((tmp_path / "r.csv").open()))
    first = lines[0]
    assert (first["best_return"], first["final_return"]) == ("400.0", "350.0")  # selection
    assert (first["final_eval_return"], first["final_eval_std"]) == ("280.0", "5.0")
    assert (first["final_eval_episodes"], first["best_eval_return"]) == ("100", "290.0")
    assert lines[2]["final_eval_return"] == lines[2]["best_eval_return"] == ""  # none: empty


def test_the_groups_aggregate_the_final_evaluations_with_their_interval(runs, tmp_path, capsys):
    assert main(["report", str(runs), "--csv", str(tmp_path / "g.csv")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "final eval" in out
    (group,) = csv.DictReader((tmp_path / "g.csv").open())
    # the two runs that have one: 280 and 300, mean 290, sd 14.142, se 10, t(0.975, 1) = 12.7062
    assert float(group["final_eval_mean"]) == 290.0
    assert float(group["final_eval_ci_low"]) == pytest.approx(290 - 127.062, abs=1e-3)
    assert group["final_eval_interval"] == "95% t-interval"
    assert float(group["final_mean"]) == pytest.approx((350 + 350 + 200) / 3)  # all three runs


def test_a_crafted_final_eval_is_left_out(tmp_path, capsys):
    run = make_run(tmp_path / "run", ["seed=0"], "CartPole-v1", [1.0, 2.0])
    record = json.loads((run / "result.json").read_text())
    record["summary"]["final_eval"] = {"return_mean": "1e9", "return_std": 0, "episodes": 3}
    (run / "result.json").write_text(json.dumps(record))
    assert main(["report", str(run), "--runs", "--csv", str(tmp_path / "r.csv")]) == 0
    (line,) = csv.DictReader((tmp_path / "r.csv").open())
    assert line["final_eval_return"] == "" and line["final_return"] == "2.0"
