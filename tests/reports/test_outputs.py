"""What ``border report`` writes for a sweep made by hand: the CSV's columns (one per swept key,
the interval's method), the scores for rliable, the figures' titles and colours, its help."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from matplotlib import pyplot as plt

from border_py.cli.main import main
from border_py.reports.aggregate import group_runs
from border_py.reports.collect import collect
from border_py.reports.plots import count, group_figure, run_figure

from .synthetic import make_run, make_sweep

CELLS = {
    ("CartPole-v1", "1e-3"): [[10.0, 100.0, 200.0, 300.0], [20.0, 120.0, 220.0, 320.0]],
    ("CartPole-v1", "3e-3"): [[30.0, 60.0, 90.0, 120.0], [40.0, 80.0, 120.0, 160.0]],
    ("Acrobot-v1", "1e-3"): [[-500.0, -400.0, -300.0, -100.0]] * 3,
    ("Acrobot-v1", "3e-3"): [[-500.0, -450.0, -400.0, -350.0]] * 3,
}


@pytest.fixture
def sweep(tmp_path):
    return make_sweep(tmp_path / "sweep", CELLS, "agent.lr")


def test_the_groups_csv_splits_the_swept_keys_and_names_the_interval(sweep, tmp_path, capsys):
    assert main(["report", str(sweep), "--csv", str(tmp_path / "g.csv")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "mean [95% t-interval] and IQM [95% percentile bootstrap] over seeds" in out
    assert "across tasks: normalised final return, the last selection evaluation (95%" in out
    lines = list(csv.DictReader((tmp_path / "g.csv").open()))
    header = list(lines[0])
    assert header[:3] == ["group", "env.id", "agent.lr"]
    assert {"final_interval", "final_iqm_ci_low", "best_iqm_interval"} <= set(header)
    cartpole = lines[0]
    assert (cartpole["env.id"], cartpole["agent.lr"], cartpole["seeds"]) == (
        "CartPole-v1",
        "1e-3",
        "2",
    )
    assert cartpole["final_interval"] == "95% t-interval"
    # finals 300 and 320: mean 310, sd 14.142, se 10, t(0.975, 1) = 12.7062
    assert float(cartpole["final_mean"]) == 310.0
    assert float(cartpole["final_ci_low"]) == pytest.approx(310 - 127.062, abs=1e-3)
    assert cartpole["final_iqm_interval"] == "95% percentile bootstrap"
    across = [line for line in lines if line["final_interval"] == "95% stratified bootstrap"]
    assert [(a["agent.lr"], a["env.id"], a["seeds"]) for a in across] == [
        ("1e-3", "", "5"),
        ("3e-3", "", "5"),
    ]
    assert across[0]["env_id"] == "CartPole-v1 Acrobot-v1 (normalised final_return)"


def test_the_runs_csv_has_a_column_per_swept_key(sweep, tmp_path):
    assert main(["report", str(sweep), "--runs", "--csv", str(tmp_path / "r.csv")]) == 0
    lines = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert list(lines[0])[:5] == ["job", "env.id", "agent.lr", "seed", "env_id"]
    assert [(r["job"], r["agent.lr"], r["seed"], r["agent_class"]) for r in lines[:3]] == [
        ("0", "1e-3", "0", "DQN"),
        ("1", "1e-3", "1", "DQN"),
        ("2", "3e-3", "0", "DQN"),
    ]


def test_the_scores_export_in_rliables_layout(sweep, tmp_path, capsys):
    path = tmp_path / "scores.npz"
    assert main(["report", str(sweep), "--export-scores", str(path)]) == 0
    data = np.load(path, allow_pickle=False)
    assert data["tasks"].tolist() == ["CartPole-v1", "Acrobot-v1"]
    assert data["groups"].tolist() == ["agent.lr=1e-3", "agent.lr=3e-3"]
    assert str(data["score"]) == "final_return"  # these runs have no final_eval
    assert data["final_0"].shape == data["normalized_0"].shape == (3, 2)  # runs x tasks
    assert data["curves_0"].shape == data["env_steps_0"].shape == (3, 2, 4)  # x evaluations
    assert data["final_0"][:, 1].tolist() == [-100.0] * 3
    assert data["final_0"][:2, 0].tolist() == [300.0, 320.0] and math.isnan(data["final_0"][2, 0])
    assert data["curves_1"][1, 0].tolist() == [40.0, 80.0, 120.0, 160.0]
    assert data["env_steps_1"][1, 0].tolist() == [1000.0, 2000.0, 3000.0, 4000.0]
    assert data["scale"].tolist() == [[23.7, 500.0], [-497.1, -76.639]]
    assert data["normalized_0"][0, 0] == pytest.approx((300 - 23.7) / 476.3)
    assert "agent.lr=1e-3: NaN where a task has fewer than 3 scored runs" in capsys.readouterr().out


def test_a_scores_file_not_npz_is_one_line(sweep, tmp_path, capsys):
    assert main(["report", str(sweep), "--export-scores", str(tmp_path / "s.csv")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"border: error: --export-scores {tmp_path / 's.csv'}: the file name must end in .npz"
    ]
    assert not (tmp_path / "s.csv").exists()


def test_the_figures_name_env_agent_budget_and_colour_by_configuration(sweep):
    _, rows = collect(sweep)
    groups, _ = group_runs(rows)
    fig = group_figure(groups)
    assert fig._suptitle.get_text() == "CartPole-v1, Acrobot-v1 · DQN · 4k env steps"
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["CartPole-v1", "Acrobot-v1"]
    assert panels[0].get_xlabel() == "environment steps"
    assert panels[0].get_ylabel() == "evaluation return (mean over episodes)"
    (legend,) = fig.legends  # one for the figure: a configuration has one colour in every panel
    assert legend.get_title().get_text() == "agent.lr"
    assert [t.get_text() for t in legend.get_texts()] == ["1e-3", "3e-3"]
    mean_colours = [h.get_color() for h in legend.legend_handles]
    per_run = run_figure(groups)
    (run_legend,) = per_run.legends
    assert run_legend.get_title().get_text() == "agent.lr · run"
    texts = [t.get_text() for t in run_legend.get_texts()]
    assert texts[0] == "1e-3 · seed=0 (0)" and len(texts) == 10
    run_colours = {
        t.get_text().split(" · ")[0]: h.get_color()
        for t, h in zip(run_legend.get_texts(), run_legend.legend_handles, strict=True)
    }
    assert run_colours == {"1e-3": mean_colours[0], "3e-3": mean_colours[1]}
    plt.close("all")


def test_a_single_runs_figure_is_titled_by_its_overrides_not_its_time(tmp_path):
    run = make_run(
        tmp_path / "10-00-00",
        ["agent=sac", "env=pendulum"],
        "Pendulum-v1",
        [-900.0, -300.0],
        agent="sac",
    )
    _, rows = collect(run)
    fig = run_figure(group_runs(rows)[0])
    assert fig._suptitle.get_text() == "Pendulum-v1 · SAC · 2k env steps"
    assert fig.axes[0].get_title() == "run: agent=sac env=pendulum"
    assert "10-00-00" not in fig._suptitle.get_text() + fig.axes[0].get_title()
    plt.close(fig)


def test_budgets_are_counted_in_three_figures():
    assert [count(v) for v in (950, 1396, 50_000, 999_999, 2_500_000)] == [
        "950",
        "1.4k",
        "50k",
        "1M",
        "2.5M",
    ]


def test_help_prints_95_percent(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the mean with its 95% interval (a t-interval below 50 seeds" in text
    assert "--export-scores" in text and "%%" not in text
