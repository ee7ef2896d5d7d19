"""The report's tables: one line per run or one per group of seeds, on the terminal (rich) and as
CSV. Text from the runs' files goes in as :class:`~rich.text.Text`, never as rich markup, and
every number within :data:`~border_py.errors.NUMBER_WIDTH` characters."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from rich.table import Table
from rich.text import Text

from border_py.errors import number_text, printable
from border_py.files import write_file
from border_py.reports.aggregate import Estimate, Group
from border_py.reports.collect import RunRow, shared_overrides
from border_py.reports.tasks import FINAL_EVAL, SCORE_TEXT, STRATIFIED_BOOTSTRAP, TaskAggregate

__all__ = ["group_table", "table", "task_table", "task_values", "write_csv"]


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else number_text(value, digits)


def _title(root: Path, what: str) -> Text:
    """A table's title: the report's dir (its name may come from a pulled folder) and ``what``."""
    return Text(f"{printable(str(root))} ({what})")


def table(root: Path, rows: list[RunRow]) -> Table:
    """The rich table of the runs; the overrides column shows what differs between them.

    ``best return`` and ``final return`` are the selection evaluations' (the best and the last);
    ``final eval`` and ``best eval`` the final weights and the best checkpoint played on fresh
    episodes at the run's end (``mean ± std (episodes)``, see ``result.json``'s ``final_eval``).
    """
    common = shared_overrides(rows)
    out = Table(
        title=_title(root, f"{len(rows)} runs"),
        caption=Text(f"every run: {' '.join(common)}") if common else None,
    )
    out.add_column("job", overflow="fold")
    out.add_column("overrides", overflow="fold", ratio=1)
    # completed, failed, interrupted, unfinished: a crafted status is cut, not the other columns
    out.add_column("status", no_wrap=True, max_width=12)
    for name in ("best return", "final return", "final eval", "best eval"):
        out.add_column(name, justify="right", no_wrap=True)
    for name in ("env steps", "opt steps", "wall time"):
        out.add_column(name, justify="right", no_wrap=True)
    style = {"completed": "green", "failed": "red", "interrupted": "yellow"}
    for row in rows:
        out.add_row(
            Text(row.job),
            Text(" ".join(o for o in row.overrides if o not in common) or "-"),
            Text(row.status, style=style.get(row.status, "dim")),
            _fmt(row.best_return),
            _fmt(row.final_return),
            row.final_eval.text() if row.final_eval else "-",
            row.best_eval.text() if row.best_eval else "-",
            _fmt(row.env_steps),
            _fmt(row.opt_steps),
            "-" if row.seconds is None else f"{number_text(row.seconds, 0)} s",
        )
    return out


def _interval(estimate_: Estimate | None, iqm: bool = False) -> str:
    if estimate_ is None:
        return "-"
    value, low, high = (
        (estimate_.iqm, estimate_.iqm_low, estimate_.iqm_high)
        if iqm
        else (estimate_.mean, estimate_.low, estimate_.high)
    )
    if low is None or high is None:
        return number_text(value)
    return f"{number_text(value)} [{number_text(low)}, {number_text(high)}]"


def _methods(groups: list[Group]) -> str:
    """The intervals' methods, as the caption names them (several when seed counts differ)."""
    found = [e for g in groups for e in (g.final_eval(), g.final()) if e is not None]
    means = " / ".join(dict.fromkeys(e.method for e in found)) or "-"
    iqms = " / ".join(dict.fromkeys(e.iqm_method for e in found)) or "-"
    return f"mean [{means}] and IQM [{iqms}] over seeds"


def group_table(root: Path, groups: list[Group], common: list[str]) -> Table:
    """One line per group: the final evaluation on fresh episodes (``final eval``), the last and
    the best selection evaluations (``final return``, ``best return``), each as mean [interval]
    and IQM [interval] over seeds; seeds, env steps; the caption names each interval's method."""
    out = Table(
        title=_title(root, f"{len(groups)} groups, {sum(len(g.runs) for g in groups)} runs"),
        caption=Text(  # text from the runs' files: never rich markup
            _methods(groups) + (f"; every run: {' '.join(common)}" if common else "")
        ),
    )
    several = len({g.env_id for g in groups}) > 1
    out.add_column("group", overflow="fold", ratio=1)
    if several:
        out.add_column("env id", overflow="fold")
    names = ("seeds", "final eval", "final eval IQM", "final return", "final IQM")
    for name in (*names, "best return", "best IQM", "env steps"):
        out.add_column(name, justify="right", no_wrap=True)
    out.add_column("failed", justify="right", no_wrap=True)
    for group in groups:
        final, best, fresh = group.final(), group.best(), group.final_eval()
        values = group.values()
        out.add_row(
            Text(group.label),
            *([Text(group.env_id)] if several else []),
            str(values["seeds"]),
            _interval(fresh),
            _interval(fresh, iqm=True),
            _interval(final),
            _interval(final, iqm=True),
            _interval(best),
            _interval(best, iqm=True),
            _fmt(values["env_steps_mean"], 0),
            Text(str(values["failed"]), style="red" if values["failed"] else "dim"),
        )
    return out


def _bounds(value: float, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return number_text(value, 2)
    return f"{number_text(value, 2)} [{number_text(low, 2)}, {number_text(high, 2)}]"


def task_table(
    aggregates: list[TaskAggregate], scales: dict[str, tuple[float, float, str]], score: str
) -> Table:
    """One line per configuration: its normalised ``score`` (a key of
    :data:`~border_py.reports.tasks.SCORE_TEXT`, named in the title) over runs x tasks (IQM and
    mean, each with its stratified-bootstrap interval); the caption gives each task's scale."""
    scale_text = "; ".join(
        f"{env_id}: 0 = {low:g}, 1 = {high:g} ({how})"
        for env_id, (low, high, how) in scales.items()
    )
    out = Table(
        title=f"across tasks: normalised {SCORE_TEXT[score]}"
        f" ({STRATIFIED_BOOTSTRAP} over runs x tasks)",
        caption=Text(scale_text),
    )
    out.add_column("configuration", overflow="fold", ratio=1)
    for name in ("tasks", "runs", "IQM", "mean"):
        out.add_column(name, justify="right", no_wrap=True)
    for agg in aggregates:
        out.add_row(
            Text(agg.label),
            str(len(agg.tasks)),
            str(agg.runs),
            _bounds(agg.iqm, agg.iqm_low, agg.iqm_high),
            _bounds(agg.mean, agg.mean_low, agg.mean_high),
        )
    return out


def task_values(agg: TaskAggregate) -> dict[str, Any]:
    """A configuration's across-task line of the groups' CSV: ``env_id`` lists its tasks and
    names the score (``(normalised final_eval)`` or ``(normalised final_return)``), ``seeds``
    counts its runs, and that score's columns (``final_eval_*``, else ``final_*``) hold its
    normalised aggregates."""
    prefix = "final_eval" if agg.score == FINAL_EVAL else "final"
    return {
        "group": agg.label,
        "env_id": f"{' '.join(agg.tasks)} (normalised {agg.score})",
        "seeds": agg.runs,
        f"{prefix}_mean": agg.mean,
        f"{prefix}_ci_low": agg.mean_low,
        f"{prefix}_ci_high": agg.mean_high,
        f"{prefix}_interval": agg.method,
        f"{prefix}_iqm": agg.iqm,
        f"{prefix}_iqm_ci_low": agg.iqm_low,
        f"{prefix}_iqm_ci_high": agg.iqm_high,
        f"{prefix}_iqm_interval": agg.method,
        "jobs": "",
    }


def write_csv(path: Path, columns: tuple[str, ...], lines: list[dict[str, Any]]) -> None:
    """``lines`` as CSV with a header of ``columns`` (one line per run: ``RunRow.values()`` and
    :data:`~border_py.reports.collect.COLUMNS`; one per group: ``Group.values()`` and
    :data:`~border_py.reports.aggregate.GROUP_COLUMNS`, then one per configuration across
    tasks: :func:`task_values`; each followed by a column per swept key), published by
    :func:`~border_py.files.write_file`. A column a line lacks is left empty."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(lines)
    write_file(path, text.getvalue().encode())
