"""``border report <run or sweep dir>``: every run's outcome in a table, their eval curves in a PNG.

Runs are found under the given directory (a run dir, a sweep dir, or ``outputs/`` as a whole):
directories with a ``result.json``, ``tensorboard/`` or ``checkpoints/``. Curves and counters are
read from the TensorBoard event files with TensorBoard's own reader; status, errors and wall time
from ``result.json`` (a run without one is still running, or was killed).
"""

from __future__ import annotations

import argparse
import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from border_py.cli.errors import fail
from border_py.errors import ConfigError
from border_py.runs.results import RESULT_FILE, read_result

CURVE_TAG = "eval/return_mean"
ENV_STEPS_TAG = "perf/env_steps"
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
    curve: list[tuple[int, float]] = field(default_factory=list)

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
    """Run dirs at or under ``root`` (never inside another run), in natural order (2 before 10)."""
    if is_run(root):
        return [root]
    found: list[Path] = []
    for child in root.iterdir():
        if child.is_dir() and not child.name.startswith("."):
            found += find_runs(child)
    return sorted(found, key=lambda p: _natural(str(p.relative_to(root))))


def _natural(text: str) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float, float]]]:
    """(step, value, wall time) per tag, for the tags the report uses."""
    log_dir = run_dir / "tensorboard"
    if not log_dir.is_dir():
        return {}
    acc = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    return {
        tag: [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)]
        for tag in (CURVE_TAG, ENV_STEPS_TAG)
        if tag in tags
    }


def _overrides(run_dir: Path, result: dict[str, Any] | None) -> list[str]:
    hydra_file = run_dir / ".hydra" / "overrides.yaml"
    if hydra_file.is_file():
        loaded = yaml.safe_load(hydra_file.read_text()) or []
        return [str(o) for o in loaded]
    return list((result or {}).get("overrides", []))


def read_run(run_dir: Path, root: Path) -> RunRow:
    """Everything the report shows about one run."""
    result = read_result(run_dir)
    scalars = _scalars(run_dir)
    summary = (result or {}).get("summary", {})
    row = RunRow(
        job=str(run_dir.relative_to(root)) if run_dir != root else run_dir.name,
        path=run_dir,
        overrides=_overrides(run_dir, result),
        status=result["status"] if result else "unfinished",
        curve=[(step, value) for step, value, _ in scalars.get(CURVE_TAG, [])],
    )
    if "final_return" in summary:  # exact; TensorBoard keeps float32
        row.best_return, row.final_return = summary["best_return"], summary["final_return"]
    elif row.curve:
        row.best_return = max(v for _, v in row.curve)
        row.final_return = row.curve[-1][1]
    env = scalars.get(ENV_STEPS_TAG, [])
    row.env_steps = summary.get("env_steps", int(env[-1][1]) if env else None)
    steps = [s for tag in scalars.values() for s, _, _ in tag]
    row.opt_steps = summary.get("opt_steps", max(steps) if steps else None)
    walls = [w for tag in scalars.values() for _, _, w in tag]
    row.seconds = summary.get("seconds", max(walls) - min(walls) if walls else None)
    if result and "error" in result:
        row.error = f"{result['error']['type']}: {result['error']['message']}"
    return row


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
    return root, [read_run(run, root) for run in runs]


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def shared_overrides(rows: list[RunRow]) -> list[str]:
    """Overrides every run has (shown once, under the table, when there are several runs)."""
    if len(rows) < 2:
        return []
    common = set(rows[0].overrides).intersection(*(row.overrides for row in rows[1:]))
    return [o for o in rows[0].overrides if o in common]


def table(root: Path, rows: list[RunRow]) -> Table:
    """The rich table of the runs; the overrides column shows what differs between them."""
    shared = shared_overrides(rows)
    out = Table(
        title=f"{root} ({len(rows)} runs)",
        caption=f"every run: {' '.join(shared)}" if shared else None,
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
            Text(" ".join(o for o in row.overrides if o not in shared) or "-"),
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
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(row.values())


def plot(root: Path, rows: list[RunRow], path: Path) -> bool:
    """Every run's eval-return curve against opt steps, in one PNG; False if no run has one."""
    curves = [row for row in rows if row.curve]
    if not curves:
        return False
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for row in curves:
        steps, values = zip(*row.curve, strict=True)
        label = row.job + (f": {' '.join(row.overrides)}" if row.overrides else "")
        ax.plot(steps, values, marker="o", markersize=3, label=label[:80])
    ax.set_xlabel("opt steps")
    ax.set_ylabel(CURVE_TAG)
    ax.set_title(root.name)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def report(path: str | Path, csv_path: Path | None, plot_path: Path | None) -> int:
    """Print the table, write the PNG (default ``<dir>/report.png``) and optionally the CSV."""
    root, rows = collect(path)
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a file or pipe: no terminal width to respect
    console.print(table(root, rows))
    for row in rows:
        if row.error:
            console.print(Text.assemble((f"{row.job} failed: ", "red"), row.error))
    png = plot_path or root / "report.png"
    if plot(root, rows, png):
        console.print(f"plot: {png}")
    else:
        console.print("no evaluations yet: no plot")
    if csv_path is not None:
        write_csv(rows, csv_path)
        console.print(f"csv: {csv_path}")
    return 0


def report_command(args: list[str]) -> int:
    """``border report``: a table of the runs under a directory, a PNG of their eval curves."""
    parser = argparse.ArgumentParser(
        prog="border report",
        description="Compare runs: a table (status, best and final eval return, steps, wall time)"
        " and a PNG of their eval/return_mean curves.",
    )
    parser.add_argument("path", help="a run dir, a sweep dir, or any directory holding runs")
    parser.add_argument("--csv", type=Path, help="also write the table as CSV to this file")
    parser.add_argument("--plot", type=Path, help="where the PNG goes (default: <path>/report.png)")
    parsed = parser.parse_args(args)
    try:
        return report(parsed.path, parsed.csv, parsed.plot)
    except ConfigError as exc:
        return fail(str(exc))
    except OSError as exc:  # --csv/--plot into a missing or read-only place
        return fail(f"{exc.filename}: {exc.strerror}")
