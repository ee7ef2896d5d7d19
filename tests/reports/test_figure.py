"""The report's figure as a paper needs it, checked on matplotlib's artists: a legend outside the
data that names each group by its values of the keys that differ (every value in full, however
long the overrides), nothing said twice, bands clipped to the returns a task can reach (the
bound drawn) or marked where they pass the best return seen."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib import pyplot as plt

from border_py.reports.aggregate import group_runs
from border_py.reports.collect import collect
from border_py.reports.plots import NOTE, group_figure, plot_groups, run_figure

from .synthetic import GYM, make_run

LONG = "agent.hidden_sizes=[512,512,512]"  # every group's: the common part of the overrides
DIFFERING = [  # two groups differing in 3 keys, the last value past character 60 of the labels
    [LONG, "agent.target_update_interval=1000", "agent.lr=0.0003", "agent.eps_decay_steps=20000"],
    [LONG, "agent.target_update_interval=250", "agent.lr=0.0001", "agent.eps_decay_steps=40000"],
]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(fig) -> list[str]:
    """Every text the figure shows: titles, legends (title and entries), notes."""
    found = [t.get_text() for t in fig.texts]  # the title and the note
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None:
            found += [legend.get_title().get_text(), *(t.get_text() for t in legend.get_texts())]
    return found + [ax.get_title() for ax in fig.axes]


def _note(fig) -> str:
    (note,) = [t for t in fig.texts if t.get_gid() == NOTE]
    return " ".join(note.get_text().split())


def _legend_texts(fig) -> list[str]:
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def _groups(root):
    return group_runs(collect(root)[1])[0]


def test_the_legend_holds_each_groups_differing_values_outside_the_data(tmp_path):
    for g, overrides in enumerate(DIFFERING):
        for seed in range(3):
            returns = [10.0 * (g + 1) + seed, 100.0 * (g + 1) + seed]
            make_run(tmp_path / f"{g}{seed}", [*overrides, f"seed={seed}"], "Acrobot-v1", returns)
    fig = group_figure(_groups(tmp_path))
    assert len(fig.legends) == 1
    (legend,) = fig.legends
    entries = [" ".join(t.get_text().split()) for t in legend.get_texts()]  # wrapped: joined
    assert entries == ["1000 · 0.0003 · 20000", "250 · 0.0001 · 40000"]
    heading = " ".join(legend.get_title().get_text().split())
    assert heading == "agent.target_update_interval · agent.lr · agent.eps_decay_steps"
    fig.canvas.draw()  # the legend sits below the panels: it overlaps none
    box = legend.get_window_extent()
    for ax in fig.axes:
        assert not box.overlaps(ax.get_window_extent())
    assert all(ax.get_legend() is None for ax in fig.axes)


def test_a_long_value_is_wrapped_never_cut(tmp_path):
    value = "[" + ",".join(["1024"] * 12) + "]"  # 61 characters without a space
    for g, sizes in enumerate([value, "[64,64]"]):
        make_run(tmp_path / str(g), [f"agent.hidden_sizes={sizes}", "seed=0"], "Acrobot-v1", [1.0])
        make_run(tmp_path / f"{g}b", [f"agent.hidden_sizes={sizes}", "seed=1"], "Acrobot-v1", [2.0])
    for fig in (group_figure(_groups(tmp_path)), run_figure(_groups(tmp_path))):
        shown = [t.replace("\n", "") for t in _legend_texts(fig)]
        assert any(value in text for text in shown), shown


def test_one_groups_configuration_is_said_once_and_the_methods_in_a_note(tmp_path):
    overrides = ["experiment=dqn_cartpole", "trainer=serial", "trainer.max_env_steps=7500"]
    for seed, final in enumerate([300.0, 310.0, 150.0]):
        make_run(tmp_path / str(seed), [*overrides, f"seed={seed}"], "CartPole-v1", [100.0, final])
    fig = group_figure(_groups(tmp_path))
    shown = " ".join(" ".join(_texts(fig)).split())
    assert shown.count("trainer.max_env_steps=7500") == 1, _texts(fig)
    assert fig.legends == [] and all(ax.get_legend() is None for ax in fig.axes)
    assert "band: its 95% t-interval" in _note(fig)
    assert "IQM" not in _note(fig)  # 3 seeds: the IQM is the mean, not drawn
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    assert [line for line in ax.get_lines() if line.get_marker() == "D"] == []


def test_from_4_seeds_the_iqm_is_drawn_and_named(tmp_path):
    for seed, final in enumerate([100.0, 200.0, 300.0, 900.0]):
        make_run(tmp_path / str(seed), [f"seed={seed}"], "Acrobot-v1", [0.0, final])
    fig = group_figure(_groups(tmp_path))
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    (iqm,) = [line for line in ax.get_lines() if line.get_marker() == "D"]
    assert iqm.get_ydata()[-1] == 250.0  # the middle two of 100, 200, 300, 900
    assert "diamonds: the IQM" in _note(fig)


def _band_top(ax) -> float:
    (band,) = ax.collections
    return float(max(path.vertices[:, 1].max() for path in band.get_paths()))


def test_a_band_is_clipped_to_the_tasks_returns_and_the_bound_drawn(tmp_path):
    """CartPole-v1 returns 500 at most: 3 seeds ending at 500, 500 and 300 have a t-interval up
    to 748, drawn up to 500, with a dashed line there; the note says so."""
    for seed, final in enumerate([500.0, 500.0, 300.0]):
        make_run(tmp_path / str(seed), [f"seed={seed}"], "CartPole-v1", [20.0, final], env=GYM)
    (group,) = _groups(tmp_path)
    assert group.band("env_steps").high[-1] > 700  # the interval itself is kept (table, CSV)
    fig = group_figure([group])
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    assert _band_top(ax) == pytest.approx(500.0)
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert [tuple(line.get_ydata()) for line in dashed] == [(500.0, 500.0)]
    assert "clipped to CartPole-v1's returns, 0 to 500 (dashed)" in _note(fig)
    # a group of seeds with no override of its own is named by its size, not by a run's dir
    assert "3 seeds" in _texts(fig) and not any("3 seeds:" in text for text in _texts(fig))
    plot_groups([group], tmp_path / "clipped.png")  # and it saves
    assert (tmp_path / "clipped.png").read_bytes()[:4] == b"\x89PNG"


def test_a_band_of_a_task_without_known_returns_is_marked_where_it_passes_the_best(tmp_path):
    for seed, final in enumerate([500.0, 500.0, 300.0]):  # no env factory in the config
        make_run(tmp_path / str(seed), [f"seed={seed}"], "MyTask-v0", [20.0, final])
    fig = group_figure(_groups(tmp_path))
    (ax,) = [ax for ax in fig.axes if ax.get_visible()]
    assert _band_top(ax) > 700  # not clipped: nothing says where the task's returns end
    (dotted,) = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert tuple(dotted.get_ydata()) == (500.0, 500.0)
    assert "past the best return a seed reached (dotted)" in _note(fig)


def test_a_single_runs_figure_has_no_legend_to_repeat_it(tmp_path):
    make_run(tmp_path / "run", ["env=gym", "seed=3"], "CartPole-v1", [1.0, 2.0, 3.0])
    fig = run_figure(_groups(tmp_path))
    assert _legend_texts(fig) == [] and fig.axes[0].get_title() == "run: env=gym"
    assert np.all(fig.axes[0].get_lines()[0].get_ydata() == [1, 2, 3])
