"""``border report``: seeds aggregated per group (mean with its t-interval, IQM), per-run views."""

from __future__ import annotations

import csv
import json
import struct

import numpy as np
import pytest

from border_py.reports.aggregate import aggregate_curves, estimate, group_runs
from border_py.reports.collect import collect

from ..conftest import TINY, run_border, run_borders, scalar_tags


def test_estimate_on_hand_checked_numbers():
    eight = estimate([1, 2, 3, 4, 5, 6, 7, 100])
    assert eight.mean == 16.0 and eight.n == 8
    assert eight.iqm == 4.5  # the middle half: 3, 4, 5, 6
    assert eight.low is not None and eight.high is not None and eight.low < 16.0 < eight.high
    three = estimate([1.0, 2.0, 6.0])
    assert three.iqm == three.mean == 3.0  # fewer than 4 seeds: nothing is cut
    # the t-interval: 3 -/+ t(0.975, 2) * sd / sqrt(3) = 3 -/+ 4.3027 * 2.6458 / 1.7321
    assert (three.low, three.high) == pytest.approx((3 - 6.5724, 3 + 6.5724), abs=1e-4)
    assert (
        estimate([1.0, 2.0, 6.0]) == three
    )  # a seeded bootstrap: the same runs, the same IQM band
    one = estimate([5.0])
    assert (one.mean, one.low, one.high, one.iqm, one.n) == (5.0, None, None, 5.0, 1)


def test_curves_are_interpolated_from_where_every_seed_has_evaluated():
    band = aggregate_curves([[(0, 0.0), (10, 1.0), (20, 2.0)], [(5, 4.0), (15, 4.0), (25, 4.0)]])
    assert band is not None and band.n == 2
    assert band.x.tolist() == [5, 10, 15, 20, 25]
    # (0.5 + 4) / 2, (1 + 4) / 2, ...; at 25 the first run, ended at 20, keeps its last value 2
    assert band.mean.tolist() == [2.25, 2.5, 2.75, 3.0, 3.0]
    assert np.all(band.low <= band.mean) and np.all(band.mean <= band.high)
    assert aggregate_curves([[], []]) is None


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
def test_report_of_a_2_groups_x_3_seeds_sweep_aggregates_over_seeds(tmp_path):
    grid = ["-m", "seed=0,1,2", "agent.lr=1e-3,3e-3", "trainer=serial"]
    out = run_border(["train", *grid, *TINY, "trainer.eval_interval=100"], tmp_path, timeout=400)
    assert out.returncode == 0, out.stderr
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    report = run_border(["report", str(sweep), "--csv", str(tmp_path / "groups.csv")], tmp_path)
    assert report.returncode == 0, report.stderr
    shown = " ".join(report.stdout.split())  # rich wraps long titles
    assert "(2 groups, 6 runs)" in shown
    assert (
        "mean [95% t-interval] and IQM [95% percentile bootstrap] over seeds; every run:"
        " experiment=dqn_cartpole trainer=serial" in shown
    )

    rows = {row["group"]: row for row in csv.DictReader((tmp_path / "groups.csv").open())}
    assert set(rows) == {"agent.lr=0.001", "agent.lr=0.003"}
    for lr, row in rows.items():
        jobs = row["jobs"].split()
        assert len(jobs) == 3 and row["seeds"] == "3" and row["failed"] == "0"
        curves = [scalar_tags(sweep / job)["eval/return_mean"] for job in jobs]
        for job in jobs:  # the group is this lr, whatever the seed
            overrides = json.loads((sweep / job / "result.json").read_text())["overrides"]
            assert lr in overrides and any(o.startswith("seed=") for o in overrides)
        finals = [curve[-1][1] for curve in curves]
        bests = [max(v for _, v in curve) for curve in curves]
        assert float(row["final_mean"]) == pytest.approx(np.mean(finals), rel=1e-6)
        assert float(row["best_mean"]) == pytest.approx(np.mean(bests), rel=1e-6)
        assert float(row["final_iqm"]) == pytest.approx(np.mean(finals), rel=1e-6)  # 3 seeds
        for name, scores in (("final", finals), ("best", bests)):
            low, high = float(row[f"{name}_ci_low"]), float(row[f"{name}_ci_high"])
            half = 4.302652729911275 * np.std(scores, ddof=1) / np.sqrt(3)  # t(0.975, 2)
            assert (low, high) == pytest.approx((np.mean(scores) - half, np.mean(scores) + half))
            assert row[f"{name}_interval"] == "95% t-interval"
        env_steps = [
            json.loads((sweep / job / "result.json").read_text())["summary"]["env_steps"]
            for job in jobs
        ]
        assert float(row["env_steps_mean"]) == pytest.approx(np.mean(env_steps))
    # 6.4 x 4.2 in at 200 dpi, trimmed to what it shows, the note under the panels included
    assert 1100 < _png_size(sweep / "report.png")[0] < 1400

    _, runs = collect(sweep)
    groups, common = group_runs(runs)
    assert "trainer=serial" in common and all(len(g.runs) == 3 for g in groups)
    for group in groups:  # x: each evaluation's own eval/env_steps, read from the event files
        band = group.band("env_steps")
        logged = {v for row in group.runs for _, v in scalar_tags(row.path)["eval/env_steps"]}
        assert band is not None and set(band.x.tolist()) <= logged and band.x.size == 3
        assert group.band("opt_steps").x.tolist() == [100, 200, 300]

    axes = ("opt_steps", "seconds")
    calls = [
        ["report", str(sweep), "--x", axis, "--plot", str(tmp_path / f"{axis}.png")]
        for axis in axes
    ]
    *again, per_run = run_borders(
        [*calls, ["report", str(sweep), "--runs", "--csv", str(tmp_path / "runs.csv")]], tmp_path
    )
    for axis, out in zip(axes, again, strict=True):
        assert out.returncode == 0, out.stderr
        assert 1100 < _png_size(tmp_path / f"{axis}.png")[0] < 1400
    assert per_run.returncode == 0 and "(6 runs)" in " ".join(per_run.stdout.split())
    assert len(list(csv.DictReader((tmp_path / "runs.csv").open()))) == 6


def test_a_bad_x_axis_is_one_line(tmp_path):
    out = run_border(["report", str(tmp_path), "--x", "episodes"], tmp_path)
    assert out.returncode == 2
    assert "invalid choice: 'episodes'" in out.stderr
