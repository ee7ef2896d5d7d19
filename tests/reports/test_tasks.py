"""Aggregation across tasks: normalised per task, IQM and mean over runs x tasks with a stratified
bootstrap, on numbers worked out by hand."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from border_py.reports.aggregate import group_runs
from border_py.reports.collect import collect
from border_py.reports.references import REFERENCES
from border_py.reports.tasks import (
    RUN_RANGE,
    aggregate_tasks,
    configurations,
    run_scores,
    stratified_bootstrap,
    task_keys,
    task_scales,
)

from .synthetic import make_run, make_sweep

# CartPole-v1: random 23.7, target 500 (a range of 476.3); Acrobot-v1: -497.1 .. -76.639 (420.461)
CARTPOLE = [23.7 + 0.5 * 476.3, 500.0]  # normalised: 0.5, 1.0
ACROBOT = [-497.1, -497.1 + 0.25 * 420.461]  # normalised: 0.0, 0.25


def _groups(root):
    _, rows = collect(root)
    return group_runs(rows)[0]


def test_two_tasks_normalised_and_aggregated_by_hand(tmp_path):
    cells = {
        ("CartPole-v1", "1e-3"): [[10.0, CARTPOLE[0]], [20.0, CARTPOLE[1]]],
        ("Acrobot-v1", "1e-3"): [[-500.0, ACROBOT[0]], [-450.0, ACROBOT[1]]],
    }
    groups = _groups(make_sweep(tmp_path / "sweep", cells, "agent.lr"))
    assert task_keys(groups) == {"env.id"}
    (config,) = configurations(groups)
    assert config.label == "all runs" and config.tasks == ["CartPole-v1", "Acrobot-v1"]
    scores = run_scores(groups)
    scales = task_scales(groups, scores)
    assert scales["CartPole-v1"][:2] == (23.7, 500.0)
    found = aggregate_tasks(config, scales, scores)
    assert found is not None and found.runs == 4
    assert found.mean == pytest.approx((0.75 + 0.125) / 2)  # the mean of the tasks' means
    assert found.iqm == pytest.approx(0.375)  # of 0, 0.25, 0.5, 1: the middle two
    assert found.mean_low is not None and found.mean_high is not None
    assert 0.25 <= found.mean_low < found.mean < found.mean_high <= 0.625  # stratified extremes
    assert found.iqm_low is not None and found.iqm_high is not None
    assert 0.0 <= found.iqm_low <= found.iqm <= found.iqm_high <= 1.0


def test_the_bootstrap_resamples_within_each_task():
    # every resample keeps two runs of each task: the mean of the task means is always 0.5
    # (a bootstrap over the pooled runs would draw 0, 0, 0, 1 too)
    bands = stratified_bootstrap([np.array([0.0, 0.0]), np.array([1.0, 1.0])])
    assert bands["mean"] == (0.5, 0.5)


def test_an_env_outside_the_table_is_scaled_by_its_runs_and_says_so(tmp_path):
    assert "MyEnv-v0" not in REFERENCES
    for job, final in enumerate([10.0, 30.0, 20.0]):
        make_run(tmp_path / str(job), ["env.id=MyEnv-v0", f"seed={job}"], "MyEnv-v0", [final])
    make_run(tmp_path / "3", ["env.id=CartPole-v1", "seed=0"], "CartPole-v1", [500.0])
    groups = _groups(tmp_path)
    scores = run_scores(groups)
    scales = task_scales(groups, scores)
    assert scales["MyEnv-v0"] == (10.0, 30.0, RUN_RANGE)
    found = aggregate_tasks(configurations(groups)[0], scales, scores)
    assert found is not None
    assert found.mean == pytest.approx(((0.0 + 1.0 + 0.5) / 3 + 1.0) / 2)


def test_a_key_is_the_task_only_when_it_matches_the_env_ids_one_to_one(tmp_path):
    for job, (recipe, env_id) in enumerate(
        [
            ("dqn_cartpole", "CartPole-v1"),
            ("iqn_cartpole", "CartPole-v1"),
            ("dqn_acrobot", "Acrobot-v1"),
        ]
    ):
        make_run(tmp_path / str(job), [f"experiment={recipe}", "seed=0"], env_id, [1.0])
    groups = _groups(tmp_path)
    assert task_keys(groups) == set()  # two recipes on CartPole: the recipe is not the task
    assert [c.label for c in configurations(groups)] == [
        "experiment=dqn_cartpole",
        "experiment=iqn_cartpole",
        "experiment=dqn_acrobot",
    ]


def test_the_docs_table_of_reference_scores_is_the_codes():
    page = Path(__file__).resolve().parents[2] / "docs" / "02-guide" / "reports.md"
    rows = re.findall(r"^\| (\S+-v\d) \| (-?[\d.]+) \| (-?[\d.]+) \|$", page.read_text(), re.M)
    shown = {env_id: (float(low), float(high)) for env_id, low, high in rows}
    assert shown == {k: (ref.random, ref.target) for k, ref in REFERENCES.items()}
