"""The report's figure: per group of seeds the mean eval return with its 95% interval (band) and,
from 4 seeds, the IQM (diamonds), or every run's curve, against env steps, opt steps or wall time;
one panel per task. Titled with the env ids, agents and env-step budget; under it, what every run
shown shares (said once). One colour per configuration, the same in both figures, and a legend
below the panels, outside the data, that names each configuration by its values of the keys that
differ between them (the keys in its title, every value in full, long ones wrapped). A band is
clipped to the returns its task can reach (:mod:`border_py.reports.bounds`), the bound drawn
dashed; a band of a task with no known bound that passes the best return a seed reached has that
return drawn dotted. A note at the bottom says what the line, band and marks are. Matplotlib is
imported when a figure is drawn (``Agg``: files only), and the image is published by
:func:`~border_py.files.write_file`."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from border_py.files import write_file
from border_py.reports.aggregate import Group
from border_py.reports.collect import RunRow, as_float, override_key, shared
from border_py.reports.labels import SEPARATOR, group_keys, values_label, wrap
from border_py.reports.tasks import configurations

__all__ = ["count", "group_figure", "plot_groups", "plot_runs", "run_figure"]

AXIS_LABELS = {
    "env_steps": "environment steps",
    "opt_steps": "optimizer steps (gradient updates)",
    "seconds": "wall-clock time (s)",
}
Y_LABEL = "evaluation return (mean over episodes)"
MARKERS = "os^vD<>pPX*h"
IQM_FROM = 4  # seeds from which the IQM differs from the mean (fewer: nothing is cut)
LEGEND_WIDTH = 40  # characters of a legend entry's line
NOTE = "note"  # the gid of the text under the figure that says what its marks are


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
    """A figure with one panel per task, titled, its layout leaving room for what goes outside
    the panels (legend, note); the panels by env id."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt
    from matplotlib.ticker import EngFormatter

    cols = min(3, len(tasks))
    rows_ = math.ceil(len(tasks) / cols)
    size = (6.4, 4.2) if len(tasks) == 1 else (4.2 * cols, 3.6 * rows_ + 0.4)
    fig, grid = plt.subplots(rows_, cols, figsize=size, squeeze=False, layout="constrained")
    fig.suptitle(_plain(title(rows)), fontsize=10)
    panels = {}
    for ax, task in zip(grid.flat, tasks, strict=False):
        ax.set_xlabel(AXIS_LABELS[axis])
        ax.set_ylabel(Y_LABEL)
        text = task if len(tasks) > 1 else subtitle
        ax.set_title(_plain(wrap(text, 100 if len(tasks) == 1 else 60)), fontsize=8)
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

    image = io.BytesIO()
    try:
        fig.savefig(  # the box grown to hold the legend and the note under the panels
            image, format=path.suffix.lstrip(".") or "png", dpi=200, bbox_inches="tight"
        )
    finally:
        plt.close(fig)
    write_file(path, image.getvalue())


def _subtitle(groups: list[Group]) -> str:
    """What every run shown shares: the group's or run's overrides, else the common ones."""
    if len(groups) == 1:
        group = groups[0]
        named = " ".join(group.overrides)
        if len(group.runs) == 1:
            return f"run: {named or group.runs[0].job}"
        return f"{len(group.runs)} seeds: {named}" if named else f"{len(group.runs)} seeds"
    common = shared(g.overrides for g in groups)
    return f"every run: {' '.join(common)}" if common else f"{len(groups)} groups"


def _config_of(groups: list[Group]) -> dict[int, str]:
    """The configuration label of each group, by ``id(group)``."""
    return {id(g): c.label for c in configurations(groups) for g in c.groups}


def _clip(ax: Any, band: Any, group: Group, colour: str) -> tuple[Any, Any, str]:
    """The band's bounds as drawn, and the note's words for what was done: clipped to the
    task's known returns (the bound the band passed drawn dashed), or (no known bound) the best
    return a seed reached drawn dotted in the group's colour when the band passes it."""
    import numpy as np

    known = group.return_range
    if known is not None:
        low, high = known
        for bound, passed in ((low, np.any(band.low < low)), (high, np.any(band.high > high))):
            if passed:
                ax.axhline(bound, color="0.35", ls="--", lw=0.8)
        clipped = np.any(band.low < low) or np.any(band.high > high)
        note = (
            f"clipped to {group.env_id}'s returns, {low:g} to {high:g} (dashed)" if clipped else ""
        )
        return np.clip(band.low, low, high), np.clip(band.high, low, high), note
    best = max(value for row in group.runs for _, value in row.curve("opt_steps"))
    if np.any(band.high > best):
        ax.axhline(best, color=colour, ls=":", lw=0.8)
        return band.low, band.high, "past the best return a seed reached (dotted)"
    return band.low, band.high, ""


def group_figure(groups: list[Group], axis: str = "env_steps") -> Any | None:
    """Per group: mean (line) with its 95% interval (band) and, from :data:`IQM_FROM` seeds, the
    IQM (diamonds) against ``axis``, one panel per task; None when no group has an evaluation
    there."""
    drawn = [(g, b) for g in groups for b in (g.band(axis),) if b is not None]
    if not drawn:
        return None
    tasks = list(dict.fromkeys(g.env_id for g, _ in drawn))
    rows = [r for g, _ in drawn for r in g.runs]
    fig, panels = _figure(rows, tasks, axis, _subtitle([g for g, _ in drawn]))
    colour, config, keys = colours(groups), _config_of(groups), group_keys(groups)
    notes: dict[str, None] = {}
    entries: dict[str, Any] = {}  # the legend's: a group's values of the keys, its line
    for group, band in drawn:
        ax, c = panels[group.env_id], colour[config[id(group)]]
        (line,) = ax.plot(band.x, band.mean, color=c, lw=1.8)
        if keys:
            entries.setdefault(values_label(group, keys), line)
        low, high, note = _clip(ax, band, group, c)
        ax.fill_between(band.x, low, high, color=c, alpha=0.2, lw=0)
        notes |= {note: None} if note else {}
        if band.n >= IQM_FROM:
            every = max(1, len(band.x) // 12)
            marks = {"marker": "D", "ms": 4, "mfc": "white", "mec": c, "markevery": every}
            ax.plot(band.x, band.iqm, ls="none", **marks)
    seeds = sorted({band.n for _, band in drawn})
    methods = " / ".join(dict.fromkeys(band.method for _, band in drawn))
    counted = " or ".join(map(str, seeds))
    text = f"Line: the mean over {counted} seeds of eval/return_mean (the selection evaluations)"
    text += f"; band: its {methods}"
    text += "".join(f", {note}" for note in notes)
    if seeds[-1] >= IQM_FROM:
        text += f"; diamonds: the IQM (from {IQM_FROM} seeds)"
    _note(fig, text + ".", _legend(fig, entries, SEPARATOR.join(keys)))
    return fig


def _legend(fig: Any, found: dict[str, Any], heading: str) -> Any | None:
    """One legend under the figure (outside the data) of ``found``'s lines by label, titled
    ``heading``, each label wrapped, never cut; None when there is none."""
    if not found:
        return None
    labels = [_plain(wrap(label, LEGEND_WIDTH)) for label in found]
    widest = max(len(line) for label in labels for line in label.splitlines())
    return fig.legend(
        list(found.values()),
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),  # its top at the figure's foot: saved with a tight box
        ncols=max(1, min(len(labels), 4, 120 // (widest + 6))),
        title=_plain(heading) or None,
        fontsize=8,
        title_fontsize=8,
        frameon=False,
    )


def _note(fig: Any, text: str, legend: Any | None) -> None:
    """What the figure's marks are, in small type under the figure and its legend (wrapped to
    the figure's width)."""
    top = 0.0
    if legend is not None:
        height = legend.get_window_extent(fig.canvas.get_renderer()).height
        top = -height / fig.bbox.height
    width = int(fig.get_figwidth() * 16)  # characters of 7 pt text across the figure
    shown = _plain(wrap(text, width))
    fig.text(0.5, top - 0.01, shown, ha="center", va="top", fontsize=7, gid=NOTE)


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
    colour, config, keys = colours(groups), _config_of(groups), group_keys(groups)
    several = any(len(g.runs) > 1 for g in shown)  # runs of one group told apart by name
    entries: dict[str, Any] = {}  # the legend's (one run alone needs none)
    for group, row, curve in drawn:
        xs, ys = zip(*curve, strict=True)
        marker = MARKERS[group.runs.index(row) % len(MARKERS)]
        c = colour[config[id(group)]]
        (line,) = panels[group.env_id].plot(xs, ys, color=c, marker=marker, ms=3)
        parts = ([values_label(group, keys)] if keys else []) + (
            [_run_name(row)] if several else []
        )
        if len(drawn) > 1:
            entries.setdefault(SEPARATOR.join(parts) or _run_name(row), line)
    heading = SEPARATOR.join([*keys, *(["run"] if several else [])])
    legend = _legend(fig, entries, heading)
    what = "Each line: one run's" if len(drawn) > 1 else "The line: the run's"
    _note(fig, f"{what} eval/return_mean (its selection evaluations).", legend)
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
