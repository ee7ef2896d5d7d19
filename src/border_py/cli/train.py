"""``border train [overrides]``: a Hydra app (``--help``, ``--cfg job``, ``-m`` work as in any Hydra
app). Before Hydra runs, the overrides are checked (:mod:`border_py.cli.checks`) so that a typo in
a group option or key fails with one line that names the closest valid choices.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import ClassVar

import hydra
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from border_py.cli.checks import check_overrides, hydra_args
from border_py.cli.errors import fail
from border_py.config import config_dir
from border_py.errors import ConfigError, RunError
from border_py.runs.checkpoint import find_checkpoint, run_dir_of_checkpoint
from border_py.runs.results import read_result, write_result
from border_py.trainers.train import train

log = logging.getLogger("border_py")


class SweepFailures:
    """The jobs of the current multirun that failed (their run dirs), for the exit status."""

    jobs = 0
    failed: ClassVar[list[str]] = []


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
def _hydra_train(cfg: DictConfig) -> float:
    """Hydra task function: train and return the objective.

    A single run turns errors into one line (exit 2: config, 1: run) and Ctrl-C into exit 130.
    In a multirun, a failing job is recorded as failed in its run dir (``result.json``, and its
    traceback in the job's log) and returns NaN, so the sweep goes on; Ctrl-C ends the sweep.
    """
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    SweepFailures.jobs += 1
    try:
        summary = train(cfg)
    except (ConfigError, RunError) as exc:
        if not multirun:
            log.error(
                "%s: %s", "config error" if isinstance(exc, ConfigError) else "run failed", exc
            )
            sys.exit(fail(str(exc), 2 if isinstance(exc, ConfigError) else 1))
        return _job_failed(exc)
    except Exception as exc:
        if not multirun:
            log.exception("run failed")
            sys.exit(
                fail(f"run failed: {type(exc).__name__}: {exc} (traceback in the run's log)", 1)
            )
        return _job_failed(exc)
    if summary.get("interrupted"):
        log.warning(
            "stopped by a signal after %d opt steps; final checkpoint saved", summary["opt_steps"]
        )
        sys.exit(130)
    return summary["objective"]


def _job_failed(exc: Exception) -> float:
    """Record a failed sweep job in its run dir and log it; the sweep goes on."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    log.error("job failed: %s", exc, exc_info=not isinstance(exc, (ConfigError, RunError)))
    if read_result(run_dir) is None:  # train() records the failures of a started run itself
        write_result(run_dir, "failed", error=exc, overrides=list(HydraConfig.get().overrides.task))
    SweepFailures.failed.append(str(run_dir))
    return float("nan")


def train_command(args: list[str]) -> int:
    """``border train``: validate the overrides, then hand over to Hydra."""
    parsed = get_args_parser().parse_args(args)
    if not (parsed.hydra_help or parsed.config_name or parsed.config_path):
        try:  # --cfg, --info and --help compose only: they never build an env or an agent
            checked = check_overrides(
                parsed.overrides,
                parsed.config_dir,
                build=not (parsed.cfg or parsed.info or parsed.help),
            )
        except ConfigError as exc:
            return fail(str(exc))
        args = hydra_args(args, parsed.overrides, checked)
    resume = [o.split("=", 1)[1] for o in parsed.overrides if o.startswith("resume=")]
    if resume and resume[0] not in ("", "null"):
        try:  # continue in the run's own dir; keep its .hydra/ as the original run wrote it
            run_dir = run_dir_of_checkpoint(find_checkpoint(resume[0]))
        except ConfigError as exc:
            return fail(str(exc))
        args = [*args, f"hydra.run.dir='{run_dir}'", "hydra.output_subdir=null"]
    sys.argv = ["border train", *args]
    SweepFailures.jobs, SweepFailures.failed = 0, []
    _hydra_train()
    if SweepFailures.failed:
        return fail(
            f"{len(SweepFailures.failed)} of {SweepFailures.jobs} sweep jobs failed"
            f" (see result.json in: {', '.join(SweepFailures.failed)})",
            1,
        )
    return 0
