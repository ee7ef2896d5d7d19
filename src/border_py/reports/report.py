"""The report as ``border report`` prints and writes it: the table of runs or of groups of seeds,
the across-task table when the runs trained on several env ids, their failures, the figure and,
when asked, the CSV and the scores for rliable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from border_py.errors import printable
from border_py.reports.aggregate import GROUP_COLUMNS, Group, group_runs, swept_keys
from border_py.reports.collect import COLUMNS, X_AXES, RunRow, collect, override_key
from border_py.reports.export import export_scores
from border_py.reports.plots import plot_groups, plot_runs
from border_py.reports.tables import (
    group_table,
    table,
    task_table,
    task_values,
    write_csv,
)
from border_py.reports.tasks import (
    aggregate_tasks,
    configurations,
    run_scores,
    task_keys,
    task_scales,
)

__all__ = ["report"]


def _text(line: str) -> Text:
    """A line naming paths (a dir's name may come from elsewhere) as plain text: never rich
    markup, its control and invisible characters escaped."""
    return Text(printable(line))


def _with_keys(columns: tuple[str, ...], keys: list[str]) -> tuple[str, ...]:
    """``columns`` with one column per swept key after the first (job or group)."""
    return (columns[0], *[k for k in keys if k not in columns], *columns[1:])


def _run_lines(rows: list[RunRow]) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The per-run CSV: its columns and lines, each run's value of every swept key split out."""
    keys = swept_keys([row.overrides for row in rows])
    lines = []
    for row in rows:
        given = {override_key(o): o.split("=", 1)[-1] for o in row.overrides}
        lines.append(row.values() | {k: given.get(k, "") for k in keys if k not in COLUMNS})
    return _with_keys(COLUMNS, keys), lines


def _group_lines(groups: list[Group]) -> tuple[tuple[str, ...], list[dict[str, Any]]]:
    """The per-group CSV: a line per group, then one per configuration across tasks."""
    lines = [group.values() for group in groups]
    keys = list(groups[0].swept)
    if len({g.env_id for g in groups}) > 1:
        scores, named = run_scores(groups), task_keys(groups)
        scales = task_scales(groups, scores)
        for config in configurations(groups):
            found = aggregate_tasks(config, scales, scores)
            if found is not None:
                swept = {k: v for k, v in config.groups[0].swept.items() if k not in named}
                lines.append(swept | task_values(found))
    return _with_keys(GROUP_COLUMNS, keys), lines


def report(
    path: str | Path,
    csv_path: Path | None,
    plot_path: Path | None,
    axis: str = "env_steps",
    per_run: bool = False,
    scores_path: Path | None = None,
) -> int:
    """Print the table(s), write the figure (default ``<dir>/report.png``) and optionally the
    CSV and (``scores_path``) the scores for rliable (:mod:`border_py.reports.export`).

    Runs are compared by group of seeds when some group has several, unless ``per_run``.
    """
    root, rows = collect(path)
    console = Console()  # the terminal's width (COLUMNS), else 80: a pipe or a file reads the same
    groups, common = group_runs(rows)
    by_group = not per_run and any(len(g.runs) > 1 for g in groups)
    console.print(group_table(root, groups, common) if by_group else table(root, rows))
    if len({g.env_id for g in groups}) > 1:
        scores = run_scores(groups)
        scales = task_scales(groups, scores)
        found = [aggregate_tasks(c, scales, scores) for c in configurations(groups)]
        console.print(task_table([a for a in found if a is not None], scales, scores.name))
    for row in rows:
        if row.error:
            console.print(Text.assemble((f"{row.job} failed: ", "red"), row.error))
    png = plot_path or root / "report.png"
    drawn = plot_groups(groups, png, axis) if by_group else plot_runs(groups, png, axis)
    shown = f"plot: {png}" if drawn else f"no evaluations with {X_AXES[axis]} yet: no plot"
    console.print(_text(shown))
    if csv_path is not None:
        write_csv(csv_path, *(_group_lines(groups) if by_group else _run_lines(rows)))
        console.print(_text(f"csv: {csv_path}"))
    if scores_path is not None:
        for note in export_scores(scores_path, groups):
            console.print(_text(f"scores: {note}"))
        console.print(_text(f"scores: {scores_path}"))
    return 0
