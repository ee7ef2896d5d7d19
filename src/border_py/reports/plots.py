"""The report's figure: per group of seeds the mean eval return with its 95% interval (band) and
the IQM (diamonds), or every run's curve, against env steps, opt steps or wall time; one panel per
task. Titled with the env ids, agents and env-step budget; one colour per configuration (the swept
keys' values), the same in both figures. Matplotlib is imported when a figure is drawn (``Agg``:
files only), and the image is published by :func:`~border_py.files.write_file`."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from border_py.files import write_file
from border_py.reports.aggregate import Group
from border_py.reports.collect import RunRow, as_float, override_key, shared
from border_py.reports.tasks import configurations

__all__ = ["count", "group_figure", "plot_groups", "plot_runs", "run_figure"]

AXIS_LABELS = {
    "env_steps": "environment steps",
    "opt_steps": "optimizer steps (gradient updates)",
    "seconds": "wall-clock time (s)",
}
Y_LABEL = "evaluation return (mean over episodes)"
MARKERS = "os^vD<>pPX*h"


def count(value: float) -> str:
    """``value`` in three significant figures with k/M/G (50000 -> ``50k``, 999999 -> ``1M``);
    from 10^12 on, in scientific notation (``1e+12``, ``inf``)."""
    value = float(f"{as_float(value):.3g}")
    if not abs(value) < 1e12:
        return f"{value:g}"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{float(f'{value / scale:.3g}'):g}{suffix}"
    return f"{value:g}"


def title(rows: list[RunRow]) -> str:
    """The figure's title: env ids, agents and the runs' env-step budget."""
    envs = ", ".join(dict.fromkeys(r.env_id for r in rows))
    agents = ", ".join(dict.fromkeys(r.agent for r in rows))
    steps = [r.env_steps for r in rows if r.env_steps is not None]
    if not steps:
        return f"{envs} · {agents}"
    budget = count(max(steps)) + " env steps"
    return f"{envs} · {agents} · {budget if min(steps) == max(steps) else 'up to ' + budget}"


def colours(groups: list[Group]) -> dict[str, str]:
    """One matplotlib colour per configuration label, in order of appearance."""
    labels = dict.fromkeys(c.label for c in configurations(groups))
    return {label: f"C{i % 10}" for i, label in enumerate(labels)}


def _plain(text: str) -> str:
    """``text`` as matplotlib shows it literally (a ``$`` would start mathtext)."""
    return text.replace("$", r"\$")


def _figure(rows: list[RunRow], tasks: list[str], axis: str, subtitle: str) -> tuple[Any, dict]:
    """A figure with one panel per task, titled; the panels by env id."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt
    from matplotlib.ticker import EngFormatter

    cols = min(3, len(tasks))
    rows_ = math.ceil(len(tasks) / cols)
    size = (6.4, 4.2) if len(tasks) == 1 else (4.2 * cols, 3.6 * rows_ + 0.4)
    fig, grid = plt.subplots(rows_, cols, figsize=size, squeeze=False)
    fig.suptitle(_plain(title(rows)), fontsize=10)
    panels = {}
    for ax, task in zip(grid.flat, tasks, strict=False):
        ax.set_xlabel(AXIS_LABELS[axis])
        ax.set_ylabel(Y_LABEL)
        ax.set_title(_plain(task if len(tasks) > 1 else subtitle), fontsize=8)
        if axis != "seconds":
            ax.xaxis.set_major_formatter(EngFormatter(sep=""))
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(alpha=0.3)
        panels[task] = ax
    for ax in list(grid.flat)[len(tasks) :]:
        ax.set_visible(False)
    return fig, panels


def _save(fig: Any, path: Path) -> None:
    """Render ``fig`` in memory (in the format ``path``'s suffix names, else PNG), then publish it
    with :func:`~border_py.files.write_file` (never through a symlink)."""
    from matplotlib import pyplot as plt

    fig.tight_layout()
    image = io.BytesIO()
    try:
        fig.savefig(image, format=path.suffix.lstrip(".") or "png", dpi=200)
    finally:
        plt.close(fig)
    write_file(path, image.getvalue())


def _subtitle(groups: list[Group]) -> str:
    """What every run shown shares: the group's or run's overrides, else the common ones."""
    if len(groups) == 1:
        group = groups[0]
        named = " ".join(group.overrides) or group.runs[0].job
        return f"run: {named}" if len(group.runs) == 1 else f"{len(group.runs)} seeds: {named}"
    common = shared(g.overrides for g in groups)
    return f"every run: {' '.join(common)}" if common else f"{len(groups)} groups"


def _config_of(groups: list[Group]) -> dict[int, str]:
    """The configuration label of each group, by ``id(group)``."""
    return {id(g): c.label for c in configurations(groups) for g in c.groups}


def group_figure(groups: list[Group], axis: str = "env_steps") -> Any | None:
    """Per group: mean (line) with its 95% interval (band) and IQM (diamonds) against ``axis``,
    one panel per task; None when no group has an evaluation there."""
    drawn = [(g, b) for g in groups for b in (g.band(axis),) if b is not None]
    if not drawn:
        return None
    tasks = list(dict.fromkeys(g.env_id for g, _ in drawn))
    rows = [r for g, _ in drawn for r in g.runs]
    fig, panels = _figure(rows, tasks, axis, _subtitle([g for g, _ in drawn]))
    colour, config = colours(groups), _config_of(groups)
    for group, band in drawn:
        ax, c = panels[group.env_id], colour[config[id(group)]]
        label = _plain(f"{config[id(group)][:60]} (n={band.n}; {band.method})")
        ax.plot(band.x, band.mean, color=c, lw=1.8, label=label)
        ax.fill_between(band.x, band.low, band.high, color=c, alpha=0.2, lw=0)
        every = max(1, len(band.x) // 12)
        ax.plot(band.x, band.iqm, ls="none", marker="D", ms=4, mfc="white", mec=c, markevery=every)
    _legend(fig, panels, iqm=True)
    return fig


def _legend(fig: Any, panels: dict[str, Any], iqm: bool) -> None:
    """Each panel's legend, and (``iqm``) what the line, band and diamonds mean."""
    from matplotlib.lines import Line2D

    for ax in panels.values():
        handles, labels = ax.get_legend_handles_labels()
        if iqm:
            handles.append(Line2D([], [], color="0.3", lw=1.8))
            labels.append("mean; band: its 95% interval")
            handles.append(Line2D([], [], ls="none", marker="D", ms=4, mfc="white", mec="0.3"))
            labels.append("IQM")
        ax.legend(handles, labels, fontsize=6, loc="best", frameon=False)


def _run_name(row: RunRow) -> str:
    """A run's name in a legend: its seed override, else its dir."""
    seeds = [o for o in row.overrides if override_key(o) == "seed"]
    return f"{seeds[-1]} ({row.job})" if seeds else row.job


def run_figure(groups: list[Group], axis: str = "env_steps") -> Any | None:
    """Every run's curve against ``axis``, coloured by its configuration, one marker per run of a
    group, one panel per task; None when no run has an evaluation there."""
    drawn = [(g, r, r.curve(axis)) for g in groups for r in g.runs if r.curve(axis)]
    if not drawn:
        return None
    tasks = list(dict.fromkeys(g.env_id for g, _, _ in drawn))
    shown = [g for g in groups if any(g is d for d, _, _ in drawn)]
    fig, panels = _figure([r for _, r, _ in drawn], tasks, axis, _subtitle(shown))
    colour, config = colours(groups), _config_of(groups)
    for group, row, curve in drawn:
        xs, ys = zip(*curve, strict=True)
        marker = MARKERS[group.runs.index(row) % len(MARKERS)]
        name = _run_name(row)
        label = f"{config[id(group)]} · {name}" if len(groups) > 1 else name
        ax = panels[group.env_id]
        ax.plot(
            xs, ys, color=colour[config[id(group)]], marker=marker, ms=3, label=_plain(label[:80])
        )
    _legend(fig, panels, iqm=False)
    return fig


def plot_groups(groups: list[Group], path: Path, axis: str = "env_steps") -> bool:
    """Write :func:`group_figure` to ``path``; False when there is nothing to draw."""
    fig = group_figure(groups, axis)
    if fig is not None:
        _save(fig, path)
    return fig is not None


def plot_runs(groups: list[Group], path: Path, axis: str = "env_steps") -> bool:
    """Write :func:`run_figure` to ``path``; False when there is nothing to draw."""
    fig = run_figure(groups, axis)
    if fig is not None:
        _save(fig, path)
    return fig is not None
