"""The report's tables: one line per run or one per group of seeds, on the terminal (rich) and as
CSV. Text from the runs' files goes in as :class:`~rich.text.Text`, never as rich markup."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from border_py.files import write_file
from border_py.reports.aggregate import Estimate, Group
from border_py.reports.collect import RunRow, shared_overrides


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(root: Path, rows: list[RunRow]) -> Table:
    """The rich table of the runs; the overrides column shows what differs between them."""
    common = shared_overrides(rows)
    out = Table(
        title=f"{root} ({len(rows)} runs)",
        caption=Text(f"every run: {' '.join(common)}") if common else None,
    )
    out.add_column("job", overflow="fold")
    out.add_column("overrides", overflow="fold", ratio=1)
    out.add_column("status", no_wrap=True)
    for name in ("best return", "final return", "env steps", "opt steps", "wall time"):
        out.add_column(name, justify="right", no_wrap=True)
    style = {"completed": "green", "failed": "red", "interrupted": "yellow"}
    for row in rows:
        out.add_row(
            Text(row.job),
            Text(" ".join(o for o in row.overrides if o not in common) or "-"),
            Text(row.status, style=style.get(row.status, "dim")),
            _fmt(row.best_return),
            _fmt(row.final_return),
            _fmt(row.env_steps),
            _fmt(row.opt_steps),
            "-" if row.seconds is None else f"{row.seconds:.0f} s",
        )
    return out


def _interval(estimate_: Estimate | None) -> str:
    if estimate_ is None:
        return "-"
    if estimate_.n < 2:
        return f"{estimate_.mean:.1f}"
    return f"{estimate_.mean:.1f} [{estimate_.low:.1f}, {estimate_.high:.1f}]"


def group_table(root: Path, groups: list[Group], common: list[str]) -> Table:
    """One line per group: final and best return (mean [95% CI], IQM), seeds, env steps."""
    out = Table(
        title=f"{root} ({len(groups)} groups, {sum(len(g.runs) for g in groups)} runs)",
        caption=Text(  # text from the runs' files: never rich markup
            "mean [95% bootstrap CI] and IQM over seeds"
            + (f"; every run: {' '.join(common)}" if common else "")
        ),
    )
    out.add_column("group", overflow="fold", ratio=1)
    for name in ("seeds", "final return", "final IQM", "best return", "best IQM", "env steps"):
        out.add_column(name, justify="right", no_wrap=True)
    out.add_column("failed", justify="right", no_wrap=True)
    for group in groups:
        final, best = group.final(), group.best()
        values = group.values()
        out.add_row(
            Text(group.label),
            str(values["seeds"]),
            _interval(final),
            _fmt(final and final.iqm),
            _interval(best),
            _fmt(best and best.iqm),
            _fmt(values["env_steps_mean"], 0),
            Text(str(values["failed"]), style="red" if values["failed"] else "dim"),
        )
    return out


def write_csv(path: Path, columns: tuple[str, ...], lines: list[dict[str, Any]]) -> None:
    """``lines`` as CSV with a header of ``columns`` (one line per run: ``RunRow.values()`` and
    :data:`~border_py.reports.collect.COLUMNS`; one per group: ``Group.values()`` and
    :data:`~border_py.reports.aggregate.GROUP_COLUMNS`), published by
    :func:`~border_py.files.write_file`."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(lines)
    write_file(path, text.getvalue().encode())
