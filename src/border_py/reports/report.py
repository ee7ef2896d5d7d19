"""The report as ``border report`` prints and writes it: the table of runs or of groups of seeds,
their failures, the plot and, when asked, the CSV."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from border_py.reports.aggregate import GROUP_COLUMNS, group_runs
from border_py.reports.collect import COLUMNS, X_AXES, collect
from border_py.reports.plots import plot, plot_groups
from border_py.reports.tables import group_table, table, write_csv


def report(
    path: str | Path,
    csv_path: Path | None,
    plot_path: Path | None,
    axis: str = "env_steps",
    per_run: bool = False,
) -> int:
    """Print the table, write the PNG (default ``<dir>/report.png``) and optionally the CSV.

    Runs are compared by group of seeds when some group has several, unless ``per_run``.
    """
    root, rows = collect(path)
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or pipe: no terminal width to respect
    groups, common = group_runs(rows)
    by_group = not per_run and any(len(g.runs) > 1 for g in groups)
    if by_group:
        console.print(group_table(root, groups, common))
    else:
        console.print(table(root, rows))
    for row in rows:
        if row.error:
            console.print(Text.assemble((f"{row.job} failed: ", "red"), row.error))
    png = plot_path or root / "report.png"
    drawn = plot_groups(groups, png, axis) if by_group else plot(root, rows, png, axis)
    console.print(f"plot: {png}" if drawn else f"no evaluations with {X_AXES[axis]} yet: no plot")
    if csv_path is not None:
        if by_group:
            write_csv(csv_path, GROUP_COLUMNS, [group.values() for group in groups])
        else:
            write_csv(csv_path, COLUMNS, [row.values() for row in rows])
        console.print(f"csv: {csv_path}")
    return 0
