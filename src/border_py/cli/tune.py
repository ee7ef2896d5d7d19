"""``border tune <space>``: hyper-parameter search with Optuna, trials in parallel, pruned early.

The command parses its arguments, sets up the console log and calls
:func:`border_py.tuning.tuner.tune` (the package's docstring says what a search is); bad input is
one error line, and a missing Optuna says which extra to install.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from border_py.cli.errors import OneLineParser, fail
from border_py.errors import ConfigError
from border_py.tuning.tuner import tune

__all__ = ["tune_command"]


def _n_jobs(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: a whole number, or 'auto'") from None


def tune_command(args: list[str]) -> int:
    """``border tune``: parse the command line, set up the console log, run the search."""
    parser = OneLineParser(
        prog="border tune",
        description="Tune hyper-parameters with Optuna: parallel trials, pruning on the eval"
        " curve, a persistent study (a journal file in the study dir, or --storage).",
        epilog="examples: border tune dqn_cartpole | border tune my_space --config-dir my_conf"
        " --n-trials 50 trainer=serial",
    )
    parser.add_argument("space", help="a search space: tune/<space>.yaml on the config path")
    parser.add_argument(
        "overrides", nargs="*", default=[], help="border train overrides for every trial"
    )
    parser.add_argument(
        "--config-dir",
        action="append",
        default=[],
        help="a directory with your own configs (tune/, agent/, env/, ...); repeatable",
    )
    parser.add_argument("--study-dir", type=Path, help="default: outputs/tune/<study_name>")
    parser.add_argument(
        "--storage",
        help="the study's storage: a database URL (sqlite:///..., postgresql://...) or a journal"
        " file path (default: <study dir>/journal.log; a study dir with an older study.db"
        " keeps using it)",
    )
    parser.add_argument("--n-trials", type=int, help="trials to run now (default: the space's)")
    parser.add_argument(
        "--n-jobs", type=_n_jobs, help="trials at once, or 'auto' (default: the space's)"
    )
    try:  # overrides may come before or after options
        parsed = parser.parse_intermixed_args(args)
    except ConfigError as exc:
        return fail(str(exc))
    from border_py.recorders.console import log_handler

    root = logging.getLogger("border_py")
    root.addHandler(log_handler())
    root.setLevel(logging.INFO)
    try:
        return tune(
            parsed.space,
            parsed.overrides,
            parsed.config_dir,
            parsed.study_dir,
            parsed.n_trials,
            parsed.n_jobs,
            parsed.storage,
        )
    except ConfigError as exc:
        return fail(str(exc))
    except ImportError as exc:
        return fail(f"border tune needs Optuna ({exc}): pip install 'border-py[tune]'")
    except KeyboardInterrupt:
        return 130
