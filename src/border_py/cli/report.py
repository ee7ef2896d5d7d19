"""``border report <run or sweep dir>``: compare runs in a table and one PNG.

Runs are found under the given directory (a run dir, a sweep dir, or ``outputs/`` as a whole):
directories with a ``result.json``, ``tensorboard/`` or ``checkpoints/``. Curves and counters are
read from the TensorBoard event files with TensorBoard's own reader; status, errors and wall time
from ``result.json`` (a run without one is still running, or was killed).

Runs whose overrides differ only in ``seed`` form a group. When some group has several seeds,
the report compares groups: per group the mean ``eval/return_mean`` with its 95% bootstrap
confidence band and the IQM (see :mod:`border_py.cli.aggregate`), against env steps, opt steps or
wall time; the table shows the same aggregates of the final and best returns. Otherwise (or with
``--runs``) it shows one line and one curve per run.
"""

from __future__ import annotations

import argparse
import csv
import io
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from rich.text import Text
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from border_py.cli.aggregate import Band, Estimate, aggregate_curves, estimate
from border_py.cli.errors import fail, printable
from border_py.errors import ConfigError
from border_py.files import write_file
from border_py.runs.links import refuse_links
from border_py.runs.results import RESULT_FILE, read_result
from border_py.runs.resume import original_overrides

log = logging.getLogger(__name__)

CURVE_TAG = "eval/return_mean"
EVAL_ENV_STEPS_TAG = "eval/env_steps"  # logged with each evaluation, at its opt step
ENV_STEPS_TAG = "perf/env_steps"  # logged every record_interval opt steps (older runs' fallback)
X_AXES = {"env_steps": "env steps", "opt_steps": "opt steps", "seconds": "wall time (s)"}
COLUMNS = (
    "job",
    "overrides",
    "status",
    "best_return",
    "final_return",
    "env_steps",
    "opt_steps",
    "seconds",
    "error",
)
GROUP_COLUMNS = (
    "group",
    "seeds",
    "final_mean",
    "final_ci_low",
    "final_ci_high",
    "final_iqm",
    "best_mean",
    "best_ci_low",
    "best_ci_high",
    "best_iqm",
    "env_steps_mean",
    "failed",
    "jobs",
)


@dataclass(frozen=True)
class Evaluation:
    """One point of a run's ``eval/return_mean`` curve, with the three x axes."""

    opt_steps: int
    env_steps: float | None
    seconds: float
    value: float

    def x(self, axis: str) -> float | None:
        """This point's position on ``axis`` (a key of :data:`X_AXES`)."""
        return {"env_steps": self.env_steps, "opt_steps": self.opt_steps, "seconds": self.seconds}[
            axis
        ]


@dataclass
class RunRow:
    """One run's line in the report."""

    job: str
    path: Path
    overrides: list[str]
    status: str
    best_return: float | None = None
    final_return: float | None = None
    env_steps: int | None = None
    opt_steps: int | None = None
    seconds: float | None = None
    error: str = ""
    evaluations: list[Evaluation] = field(default_factory=list)

    def curve(self, axis: str) -> list[tuple[float, float]]:
        """(x, eval/return_mean) points on ``axis``; evaluations without that x are left out."""
        points = [(e.x(axis), e.value) for e in self.evaluations]
        return [(float(x), value) for x, value in points if x is not None]

    def values(self) -> dict[str, Any]:
        """The row as plain values, keyed by :data:`COLUMNS`."""
        return {
            "job": self.job,
            "overrides": " ".join(self.overrides),
            "status": self.status,
            "best_return": self.best_return,
            "final_return": self.final_return,
            "env_steps": self.env_steps,
            "opt_steps": self.opt_steps,
            "seconds": None if self.seconds is None else round(self.seconds, 1),
            "error": self.error,
        }


def is_run(path: Path) -> bool:
    """Whether ``path`` is a border-py run dir."""
    return any((path / name).exists() for name in (RESULT_FILE, "tensorboard", "checkpoints"))


def find_runs(root: Path) -> list[Path]:
    """Run dirs at or under ``root`` (never inside another run, never through a symlinked dir), in
    natural order (2 before 10)."""
    if is_run(root):
        return [root]
    found: list[Path] = []
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink() and not child.name.startswith("."):
            found += find_runs(child)
    return sorted(found, key=lambda p: _natural(str(p.relative_to(root))))


def _natural(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _events(run_dir: Path) -> tuple[dict[str, list[tuple[int, float, float]]], float | None]:
    """(step, value, wall time) per tag the report uses, and the wall time of the first event."""
    log_dir = run_dir / "tensorboard"
    if not log_dir.is_dir():
        return {}, None
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    scalars = {
        tag: [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
        for tag in (CURVE_TAG, EVAL_ENV_STEPS_TAG, ENV_STEPS_TAG)
        if tag in tags
    }
    try:
        first = acc.FirstEventTimestamp()
    except ValueError:  # no event at all
        first = None
    return scalars, first


def evaluations(
    scalars: dict[str, list[tuple[int, float, float]]], started: float | None
) -> list[Evaluation]:
    """The run's evaluations with their env steps (``eval/env_steps`` at the same opt step, else
    ``perf/env_steps`` interpolated at it) and seconds since the run's first event."""
    at_eval = {step: value for step, value, _ in scalars.get(EVAL_ENV_STEPS_TAG, [])}
    perf = scalars.get(ENV_STEPS_TAG, [])
    out = []
    for step, value, wall in scalars.get(CURVE_TAG, []):
        env_steps: float | None = at_eval.get(step)
        if env_steps is None and perf:
            env_steps = float(np.interp(step, [s for s, _, _ in perf], [v for _, v, _ in perf]))
        seconds = wall - started if started is not None else 0.0
        out.append(Evaluation(step, env_steps, seconds, value))
    return out


def read_run(run_dir: Path, root: Path) -> RunRow:
    """Everything the report shows about one run (text from its files with control characters
    escaped, numbers only where numbers go)."""
    result = read_result(run_dir) or {}
    scalars, started = _events(run_dir)
    summary = result.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    row = RunRow(
        job=printable(str(run_dir.relative_to(root)) if run_dir != root else run_dir.name),
        path=run_dir,
        overrides=[printable(o) for o in original_overrides(run_dir)],
        status=printable(str(result["status"])) if "status" in result else "unfinished",
        evaluations=evaluations(scalars, started),
    )
    curve = row.curve("opt_steps")
    if "final_return" in summary:  # exact; TensorBoard keeps float32
        row.best_return = _number(summary.get("best_return"))
        row.final_return = _number(summary["final_return"])
    elif curve:
        row.best_return = max(v for _, v in curve)
        row.final_return = curve[-1][1]
    env = scalars.get(ENV_STEPS_TAG, [])
    row.env_steps = _number(summary.get("env_steps", int(env[-1][1]) if env else None))
    steps = [s for tag in scalars.values() for s, _, _ in tag]
    row.opt_steps = _number(summary.get("opt_steps", max(steps) if steps else None))
    walls = [w for tag in scalars.values() for _, _, w in tag]
    row.seconds = _number(summary.get("seconds", max(walls) - min(walls) if walls else None))
    error = result.get("error")
    if isinstance(error, dict):
        row.error = printable(f"{error.get('type')}: {error.get('message')}")
    return row


def _number(value: Any) -> Any:
    """``value`` if it is a number, else None (a crafted ``result.json`` may hold anything)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return value if ok else None


def collect(path: str | Path) -> tuple[Path, list[RunRow]]:
    """The report's root and its runs; one :class:`ConfigError` line when there is nothing."""
    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise ConfigError(f"{root}: no such directory")
    runs = find_runs(root)
    if not runs:
        raise ConfigError(
            f"{root}: no border-py runs here (no result.json, tensorboard/ or checkpoints/)"
        )
    rows = []
    for run in runs:
        try:
            refuse_links(run)  # a link would be read through, a FIFO would block the report
        except ConfigError as exc:
            log.warning("skipped %s: %s", run, printable(str(exc)))
            continue
        rows.append(read_run(run, root))
    if not rows:
        raise ConfigError(f"{root}: no run here that border can read (each was skipped)")
    return root, rows


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def shared(overrides: Iterable[list[str]] | Iterable[tuple[str, ...]]) -> list[str]:
    """Overrides every one of several lists has (shown once, under the table)."""
    lists = [list(o) for o in overrides]
    if len(lists) < 2:
        return []
    common = set(lists[0]).intersection(*lists[1:])
    return [o for o in lists[0] if o in common]


def shared_overrides(rows: list[RunRow]) -> list[str]:
    """Overrides every run has (shown once, under the table, when there are several runs)."""
    return shared(row.overrides for row in rows)


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


def write_csv(rows: list[RunRow], path: Path) -> None:
    """The table as CSV (one line per run, :data:`COLUMNS`)."""
    _write_csv(path, COLUMNS, [row.values() for row in rows])


def _write_csv(path: Path, columns: tuple[str, ...], lines: list[dict[str, Any]]) -> None:
    """``lines`` as CSV with a header, published by :func:`~border_py.files.write_file`."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()
    writer.writerows(lines)
    write_file(path, text.getvalue().encode())


# --- groups of seeds -----------------------------------------------------------------------------


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


@dataclass
class Group:
    """Runs whose overrides differ only in ``seed``.

    Attributes:
        overrides: the overrides of its runs, ``seed`` left out.
        runs: every run of the group.
        label: what sets it apart from the other groups (filled by :func:`group_runs`).
    """

    overrides: tuple[str, ...]
    runs: list[RunRow]
    label: str = ""

    @property
    def scored(self) -> list[RunRow]:
        """The runs with at least one evaluation (the seeds the aggregates are over)."""
        return [row for row in self.runs if row.final_return is not None]

    def final(self) -> Estimate | None:
        """Aggregate of the runs' final ``eval/return_mean``."""
        scores = [row.final_return for row in self.runs if row.final_return is not None]
        return estimate(scores) if scores else None

    def best(self) -> Estimate | None:
        """Aggregate of the runs' best ``eval/return_mean``."""
        scores = [row.best_return for row in self.runs if row.best_return is not None]
        return estimate(scores) if scores else None

    def band(self, axis: str) -> Band | None:
        """The group's ``eval/return_mean`` against ``axis``, aggregated over its seeds."""
        return aggregate_curves([row.curve(axis) for row in self.runs])

    def values(self) -> dict[str, Any]:
        """The group's line, keyed by :data:`GROUP_COLUMNS`."""
        final, best = self.final(), self.best()
        steps = [r.env_steps for r in self.scored if r.env_steps is not None]
        return {
            "group": self.label,
            "seeds": len(self.scored),
            "final_mean": final and final.mean,
            "final_ci_low": final and final.low,
            "final_ci_high": final and final.high,
            "final_iqm": final and final.iqm,
            "best_mean": best and best.mean,
            "best_ci_low": best and best.low,
            "best_ci_high": best and best.high,
            "best_iqm": best and best.iqm,
            "env_steps_mean": float(np.mean(steps)) if steps else None,
            "failed": sum(r.status == "failed" for r in self.runs),
            "jobs": " ".join(r.job for r in self.runs),
        }


def group_runs(rows: list[RunRow]) -> tuple[list[Group], list[str]]:
    """Runs grouped by their overrides minus ``seed`` (in order of appearance), and the
    overrides every group shares (each group's label is what is left)."""
    groups: dict[tuple[str, ...], Group] = {}
    for row in rows:
        key = tuple(o for o in row.overrides if _key(o) != "seed")
        groups.setdefault(key, Group(key, [])).runs.append(row)
    common = shared(g.overrides for g in groups.values())
    for group in groups.values():
        group.label = " ".join(o for o in group.overrides if o not in common) or "all runs"
    return list(groups.values()), common


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


def write_group_csv(groups: list[Group], path: Path) -> None:
    """The group table as CSV (one line per group, :data:`GROUP_COLUMNS`)."""
    _write_csv(path, GROUP_COLUMNS, [group.values() for group in groups])


# --- plots ---------------------------------------------------------------------------------------


def _axes(title: str, axis: str) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt
    from matplotlib.ticker import EngFormatter

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.set_xlabel(X_AXES[axis])
    ax.set_ylabel("evaluation return")
    ax.set_title(title, fontsize=9)
    if axis != "seconds":
        ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(alpha=0.3)
    return fig, ax


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


def _plain_label(text: str) -> str:
    """``text`` as matplotlib shows it literally (a ``$`` would start mathtext)."""
    return text.replace("$", r"\$")


def plot(root: Path, rows: list[RunRow], path: Path, axis: str = "env_steps") -> bool:
    """Every run's eval-return curve against ``axis``, in one PNG; False if no run has one."""
    curves = [(row, row.curve(axis)) for row in rows if row.curve(axis)]
    if not curves:
        return False
    common = shared_overrides(rows)
    fig, ax = _axes(root.name, axis)
    for row, curve in curves:
        xs, ys = zip(*curve, strict=True)
        differing = " ".join(o for o in row.overrides if o not in common)
        label = row.job + (f": {differing}" if differing else "")
        ax.plot(xs, ys, marker="o", markersize=3, label=_plain_label(label[:80]))
    ax.legend(fontsize=7, loc="best")
    _save(fig, path)
    return True


def plot_groups(groups: list[Group], path: Path, axis: str = "env_steps") -> bool:
    """Per group: mean (solid) with its 95% bootstrap band and IQM (dashed) against ``axis``."""
    bands = [(group, group.band(axis)) for group in groups]
    drawn = [(group, band) for group, band in bands if band is not None]
    if not drawn:
        return False
    fig, ax = _axes("mean over seeds with its 95% bootstrap CI (band); IQM dashed", axis)
    for i, (group, band) in enumerate(drawn):
        color = f"C{i % 10}"
        label = _plain_label(f"{group.label[:60]} (n={band.n})")
        ax.plot(band.x, band.mean, color=color, lw=1.8, label=label)
        ax.fill_between(band.x, band.low, band.high, color=color, alpha=0.2, lw=0)
        ax.plot(band.x, band.iqm, color=color, lw=1.0, ls="--")
    ax.legend(fontsize=7, loc="best", frameon=False)
    _save(fig, path)
    return True


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
            write_group_csv(groups, csv_path)
        else:
            write_csv(rows, csv_path)
        console.print(f"csv: {csv_path}")
    return 0


def report_command(args: list[str]) -> int:
    """``border report``: a table of the runs under a directory, a PNG of their eval curves."""
    parser = argparse.ArgumentParser(
        prog="border report",
        description="Compare runs: a table and a PNG of their eval/return_mean curves. Runs that"
        " differ only in seed are aggregated (mean with a 95%% bootstrap CI, IQM).",
    )
    parser.add_argument("path", help="a run dir, a sweep dir, or any directory holding runs")
    parser.add_argument("--csv", type=Path, help="also write the table as CSV to this file")
    parser.add_argument("--plot", type=Path, help="where the PNG goes (default: <path>/report.png)")
    parser.add_argument(
        "--x",
        choices=list(X_AXES),
        default="env_steps",
        help="the curves' x axis (default: env_steps)",
    )
    parser.add_argument(
        "--runs",
        action="store_true",
        help="one line and one curve per run, even for runs that differ only in seed",
    )
    parsed = parser.parse_args(args)
    try:
        return report(parsed.path, parsed.csv, parsed.plot, parsed.x, parsed.runs)
    except ConfigError as exc:
        return fail(str(exc))
    except OSError as exc:  # --csv/--plot into a missing or read-only place
        return fail(f"{exc.filename}: {exc.strerror}")
