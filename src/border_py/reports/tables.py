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
from border_py.reports.labels import SEPARATOR, group_keys, values_label
from border_py.reports.tasks import FINAL_EVAL, SCORE_TEXT, STRATIFIED_BOOTSTRAP, TaskAggregate

__all__ = ["group_table", "table", "task_table", "task_values", "write_csv"]

WIDEST = 24  # a number column's most characters: on 80 columns, the label column keeps ~15


def _fmt(value: Any, digits: int = 1) -> str:
    return "-" if value is None else number_text(value, digits)


def _title(root: Path, what: str) -> Text:
    """A table's title: the report's dir (its name may come from a pulled folder) and ``what``."""
    return Text(f"{printable(str(root))} ({what})")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _lines(*parts: Text | str) -> Text:
    """``parts`` on their own lines, each as it is (never rich markup)."""
    return Text("\n").join(Text(p) if isinstance(p, str) else p for p in parts)


def _number_column(out: Table, name: str, cells: list[str]) -> None:
    """A right-aligned column as wide as its longest cell of ``cells`` (or its name's longest
    word) up to :data:`WIDEST`, never narrower when the table shrinks to fit the terminal (its
    other columns wrap); a longer cell wraps at its spaces (an interval's bounds go on the next
    line), and a number, at most :data:`~border_py.errors.NUMBER_WIDTH` characters, is never
    cut."""
    width = min(WIDEST, max(len(text) for text in [*cells, *name.split()]))
    out.add_column(name, justify="right", overflow="fold", width=width)


def table(root: Path, rows: list[RunRow]) -> Table:
    """The rich table of the runs, one line per run on 80 columns: the run (its job, the
    overrides that differ between runs, its status), its selection returns, its final
    evaluations on fresh episodes and its counts.

    ``best``/``final`` under ``selection return`` are the selection evaluations' (the best and
    the last); under ``fresh eval``, the final weights and the best checkpoint played on fresh
    episodes at the run's end (``mean ± std (episodes)``, see ``result.json``'s ``final_eval``).
    """
    common = shared_overrides(rows)
    out = Table(
        title=_title(root, _plural(len(rows), "run")),
        caption=Text(f"every run: {' '.join(common)}") if common else None,
    )
    style = {"completed": "green", "failed": "red", "interrupted": "yellow"}
    cells = []
    for row in rows:
        fresh = [
            f"{name} {score.text()}"
            for name, score in (("final", row.final_eval), ("best", row.best_eval))
            if score is not None
        ]
        seconds = "-" if row.seconds is None else f"{number_text(row.seconds, 0)} s"
        cells.append(
            [
                [f"best {_fmt(row.best_return)}", f"final {_fmt(row.final_return)}"],
                fresh or ["-"],
                [f"{_fmt(row.env_steps)} env", f"{_fmt(row.opt_steps)} opt", seconds],
            ]
        )
    out.add_column("run", overflow="fold")
    for i, name in enumerate(("selection return", "fresh eval", "steps, time")):
        _number_column(out, name, [line for cell in cells for line in cell[i]])
    for row, numbers in zip(rows, cells, strict=True):
        out.add_row(
            _lines(
                Text(row.job, style="bold"),
                " ".join(o for o in row.overrides if o not in common) or "-",
                Text(row.status, style=style.get(row.status, "dim")),
            ),
            *(_lines(*lines) for lines in numbers),
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


def _group_cell(group: Group, keys: list[str]) -> Text:
    """A group's heading line: its values of ``keys`` (the column's header names them), then its
    task, seeds and mean env steps, then its failed runs (in red)."""
    values = group.values()
    steps = values["env_steps_mean"]
    counts = f"{group.env_id} · {_plural(values['seeds'], 'seed')}"
    if steps is not None:
        counts += f" · {number_text(steps, 0)} env steps"
    parts = [Text(values_label(group, keys) if keys else "all runs", style="bold")]
    parts.append(Text(counts, style="dim"))
    if values["failed"]:
        parts.append(Text(f"{values['failed']} failed", style="red"))
    return _lines(*parts)


def group_table(root: Path, groups: list[Group], common: list[str]) -> Table:
    """Per group, a heading line and one line per score, to fit 80 columns: the final
    evaluation on fresh episodes (``final eval``, when a run of the report has one), the last
    and the best selection evaluations (``final return``, ``best return``), each as the mean
    [its interval] and the IQM [its interval] over seeds. The first column is headed by the keys
    that tell the groups apart (:func:`~border_py.reports.labels.group_keys`); a group's heading
    holds its values of them, its task, seeds, mean env steps and failed runs. The caption names
    each interval's method and the overrides every run shares (``common``; a single group's
    own)."""
    runs = sum(len(g.runs) for g in groups)
    common = list(groups[0].overrides) if len(groups) == 1 else common
    out = Table(
        title=_title(root, f"{_plural(len(groups), 'group')}, {_plural(runs, 'run')}"),
        caption=Text(  # text from the runs' files: never rich markup
            _methods(groups) + (f"; every run: {' '.join(common)}" if common else "")
        ),
    )
    keys = group_keys(groups)
    fresh = any(g.final_eval() is not None for g in groups)
    lines = []
    for group in groups:
        scores = [("final return", group.final()), ("best return", group.best())]
        if fresh:
            scores.insert(0, ("final eval", group.final_eval()))
        lines.append([(name, _interval(e), _interval(e, iqm=True)) for name, e in scores])
    out.add_column(f"{SEPARATOR.join(keys) if keys else 'group'}: score", overflow="fold")
    _number_column(out, "mean [95% interval]", [m for line in lines for _, m, _ in line])
    _number_column(out, "IQM [95% interval]", [i for line in lines for _, _, i in line])
    for group, line in zip(groups, lines, strict=True):
        out.add_row(_group_cell(group, keys), "", "")
        for i, (name, mean, iqm) in enumerate(line):
            out.add_row(Text(f"  {name}"), mean, iqm, end_section=i == len(line) - 1)
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
    lines = [
        [
            str(len(agg.tasks)),
            str(agg.runs),
            _bounds(agg.iqm, agg.iqm_low, agg.iqm_high),
            _bounds(agg.mean, agg.mean_low, agg.mean_high),
        ]
        for agg in aggregates
    ]
    out.add_column("configuration", overflow="fold")
    for i, name in enumerate(("tasks", "runs", "IQM", "mean")):
        _number_column(out, name, [line[i] for line in lines])
    for agg, line in zip(aggregates, lines, strict=True):
        out.add_row(Text(agg.label), *line)
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
