"""``border report <run or sweep dir>``: compare runs in a table and one PNG.

The command parses its arguments and calls :func:`border_py.reports.report.report` (the package's
docstring says what a report shows); bad input is one error line.
"""

from __future__ import annotations

from pathlib import Path

from border_py.cli.errors import OneLineParser, fail
from border_py.errors import ConfigError
from border_py.reports.collect import X_AXES
from border_py.reports.intervals import BOOTSTRAP_FROM
from border_py.reports.report import report

__all__ = ["report_command"]


def report_command(args: list[str]) -> int:
    """``border report``: a table of the runs under a directory, a PNG of their eval curves."""
    parser = OneLineParser(
        prog="border report",
        # argparse %-formats help strings but prints the description as it is: one % here
        description="Compare runs: a table and a PNG of their eval/return_mean curves. Runs that"
        " differ only in seed are aggregated: the mean with its 95% interval (a t-interval below"
        f" {BOOTSTRAP_FROM} seeds, a BCa bootstrap from {BOOTSTRAP_FROM}) and the IQM with its 95%"
        " percentile bootstrap. Runs of several env ids are also aggregated across tasks"
        " (normalised scores, 95% stratified bootstrap).",
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
    parser.add_argument(
        "--export-scores",
        type=Path,
        metavar="SCORES.npz",
        help="also write the scores in rliable's layout (final scores per group: runs x tasks,"
        " final_eval when every run has one, else final_return; curves: runs x tasks x"
        " evaluations) to this .npz file",
    )
    try:
        parsed = parser.parse_args(args)
    except ConfigError as exc:
        return fail(str(exc))
    if parsed.export_scores is not None and parsed.export_scores.suffix != ".npz":
        return fail(f"--export-scores {parsed.export_scores}: the file name must end in .npz")
    try:
        return report(
            parsed.path, parsed.csv, parsed.plot, parsed.x, parsed.runs, parsed.export_scores
        )
    except ConfigError as exc:
        return fail(str(exc))
    except OSError as exc:  # --csv/--plot/--export-scores into a missing or read-only place
        return fail(f"{exc.filename}: {exc.strerror}")
