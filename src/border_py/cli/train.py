"""``border train [overrides]``: a Hydra app (``--help``, ``--cfg job``, ``-m`` work as in any Hydra
app). Before Hydra runs, the overrides are checked (:mod:`border_py.cli.checks`) so that a typo in
a group option or key fails with one line that names the closest valid choices.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TextIO

import hydra
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from border_py._version import __version__
from border_py.cli.checks import check_overrides
from border_py.cli.config_source import ConfigSource, hide_from_listings
from border_py.cli.errors import OneLineParser, fail
from border_py.cli.hydra_callbacks import report_sweep
from border_py.cli.recipes import lookup, recipes, searchpath_of
from border_py.config import config_dir
from border_py.errors import ConfigError, RunError
from border_py.overrides import parse_overrides
from border_py.runs.lock import RunInUse, refuse_if_in_use
from border_py.runs.results import read_result, write_result
from border_py.runs.run_dir import RunCompleted, settle_resume, start_afresh
from border_py.trainers.train import train

__all__ = ["train_command"]

log = logging.getLogger("border_py")


class Notes:
    """What ``border train`` settled before Hydra ran, for the job's log."""

    recipe: str | None = None


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
def _hydra_train(cfg: DictConfig) -> float:
    """Hydra task function: train and return the objective.

    A single run turns errors into one line (exit 2: config, 1: run) and Ctrl-C into exit 130.
    In a multirun, a failing job is recorded as failed in its run dir (``result.json``, and its
    traceback in the job's log) and returns NaN, so the sweep goes on; Ctrl-C ends the sweep.
    """
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    if Notes.recipe is not None:
        log.info(
            "recipe experiment=%s, looked up for this agent and env (your key=value overrides"
            " win; experiment=none trains without it)",
            Notes.recipe,
        )
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
    """Record a failed sweep job in its run dir and log it; the sweep goes on (the sweep's end
    reads the record back, see :mod:`border_py.cli.hydra_callbacks`)."""
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    log.error("job failed: %s", exc, exc_info=not isinstance(exc, (ConfigError, RunError)))
    # train() records the failures of a started run itself; a live one's dir is not this job's
    earlier = read_result(run_dir)
    if isinstance(exc, RunInUse) or (earlier or {}).get("status") == "failed":
        return float("nan")
    try:  # a job refused before it started (a requeued one too: the earlier summary is kept)
        summary = (earlier or {}).get("summary")
        overrides = (earlier or {}).get("overrides") or list(HydraConfig.get().overrides.task)
        write_result(run_dir, "failed", summary, error=exc, overrides=overrides)
    except OSError as write_error:  # e.g. a full disk: the sweep goes on, the job is failed
        log.error("result.json could not be written: %s", write_error)
    return float("nan")


def train_command(args: list[str]) -> int:
    """``border train``: settle ``resume=``, validate the overrides, then hand over to Hydra.

    ``--version`` is border-py's; ``--hydra-help`` shows Hydra's own config, which holds no task
    config to look a recipe up for or to check: only ``hydra`` overrides go with it. (``-sc``,
    shell completion, is :mod:`border_py.cli.completion`'s, reached from :mod:`~border_py.cli.main`.)
    """
    if "--version" in args:
        print(f"border-py {__version__}")
        return 0
    args = _info_before_overrides(args)
    try:
        parsed = _parse(args)
        _check_hydra_keys(parsed)
    except ConfigError as exc:
        return fail(str(exc))
    if parsed.hydra_help:
        hydra_keys = [o for o in parsed.overrides if _is_hydra_key(_key(o).lstrip("+~"))]
        return _run_hydra(_with_override(args, parsed.overrides, *hydra_keys, replace=True))
    try:
        inspect_only = parsed.cfg or parsed.info or parsed.help
        args, fresh_in = _settle_resume(args, parsed.overrides, parsed.multirun, not inspect_only)
    except ConfigError as exc:
        return fail(str(exc))
    except RunCompleted as done:
        print(f"border: {done}", file=sys.stderr)
        return 0
    parsed = _parse(args)
    custom_config = parsed.config_name or parsed.config_path
    recipe = (
        None
        if custom_config or _resuming(parsed.overrides)
        else lookup(parsed.overrides, parsed.config_dir)
    )
    if recipe is not None:  # RL Zoo's rule: the task's recipe, under the command line's keys
        args = _with_override(args, parsed.overrides, f"experiment={recipe}")
        parsed = _parse(args)
    if not custom_config:
        try:  # --cfg, --info and --help compose only: they never build an env or an agent
            checked = check_overrides(
                parsed.overrides,
                parsed.config_dir,
                build=not (parsed.cfg or parsed.info or parsed.help),
            )
        except ConfigError as exc:
            return fail(str(exc))
        args = _hydra_args(args, parsed.overrides, checked)
    Notes.recipe = recipe
    if recipe is not None and inspect_only:
        searchpath = searchpath_of(parsed.overrides, parsed.config_dir)
        _say_recipe(recipe, searchpath, sys.stdout if parsed.help else sys.stderr)
    if fresh_in is not None:  # resume=auto with no checkpoint: start fresh there
        start_afresh(fresh_in)
    return _run_hydra(args)


def _hydra_args(args: list[str], given: list[str], checked: list[str]) -> list[str]:
    """``args`` with its overrides (``given``, contiguous, as Hydra's parser requires) replaced
    by what :func:`~border_py.cli.checks.check_overrides` made of them (``checked``)."""
    for start in range(len(args) - len(given) + 1):
        if given and args[start : start + len(given)] == given:
            return [*args[:start], *checked, *args[start + len(given) :]]
    return args


def _parse(args: list[str]) -> argparse.Namespace:
    """Hydra's reading of the command line (its flags, then the overrides).

    Raises:
        ConfigError: an unknown flag or a bad value of one, in one line (not argparse's usage).
    """
    parser = OneLineParser(prog="border train", parents=[get_args_parser()], add_help=False)
    return parser.parse_args(args)


def _check_hydra_keys(parsed: argparse.Namespace) -> None:
    """Compose Hydra's own config with the command line's ``hydra`` overrides before Hydra does,
    so that a refused one is border's error line, its secrets redacted (Hydra's own message
    echoes the override whole: ``use +hydra.job.env_set.TOKEN=<the secret>``). A swept ``hydra``
    key, and the overrides of a config of your own (``--config-name``, ``--config-path``), are
    left to Hydra.

    Raises:
        ConfigError: one line (Hydra's refusal, see
            :func:`~border_py.cli.errors.hydra_error_line`).
    """
    if parsed.config_name or parsed.config_path:
        return
    given = [o for o in parsed.overrides if _is_hydra_key(_key(o).lstrip("+~"))]
    if not given:
        return
    found = parse_overrides(given)
    single = [
        text
        for override, text in zip(found, given, strict=True)
        if not override.is_sweep_override() and override.key_or_group != "hydra.searchpath"
    ]
    if single:  # the search path: ConfigSource's own override
        ConfigSource.of(found, parsed.config_dir).compose(single, hydra=True)


def _run_hydra(args: list[str]) -> int:
    """Run the Hydra app with ``args``; 0, or after a sweep its outcome (see
    :func:`~border_py.cli.hydra_callbacks.report_sweep`)."""
    sys.argv = ["border train", *args]  # Hydra's help names the command by sys.argv[0]
    hide_from_listings()  # --help and glob(*) sweeps list options only
    _hydra_train()
    return report_sweep()


def _say_recipe(recipe: str, searchpath: tuple[str, ...], stream: TextIO) -> None:
    """One line before ``--help``, ``--cfg`` or ``--info``: the values they show include the
    looked-up recipe, shipped or on ``searchpath`` (on stderr for ``--cfg`` and ``--info``, whose
    stdout stays YAML)."""
    found = recipes(searchpath).items()
    basis = [f"agent={a}, env.id={e}" for (a, e), name in found if name == recipe]
    print(
        f"border: recipe {recipe} applied (looked up by {basis[0]}); values below include it;"
        " experiment=none leaves it out",
        file=stream,
        flush=True,
    )


def _settle_resume(
    args: list[str], overrides: list[str], multirun: bool, training: bool = True
) -> tuple[list[str], Path | None]:
    """Settle ``resume=`` before Hydra runs (:func:`~border_py.runs.run_dir.settle_resume`):
    ``resume=auto`` becomes ``resume=<newest checkpoint>`` or ``resume=null``, and a resumed run
    is pointed at its own dir (keeping its ``.hydra/`` as the original run wrote it). In a
    multirun, each job settles ``resume=auto`` in its own dir (see ``train``).

    Returns the new arguments and, for ``resume=auto`` without a checkpoint, the dir the fresh
    run starts in (where an earlier attempt's files are to be set aside).
    """
    target = _resume_value(overrides)
    if target in (None, "", "null") or (target == "auto" and multirun):
        return args, None
    run_dir = _explicit_run_dir(overrides) if target == "auto" else None
    if training and run_dir is not None:  # a live session's files: not even read
        refuse_if_in_use(run_dir)
    settled = settle_resume(target, run_dir)
    if training:  # --cfg, --info and --help may look at a live run
        refuse_if_in_use(settled.run_dir)
    new = list(overrides)
    if target == "auto":  # the attempt's own command line: the checkpoint it continues, or none
        checkpoint = "null" if settled.checkpoint is None else str(settled.checkpoint)
        new = [f"resume={checkpoint}" if _key(o) == "resume" else o for o in overrides]
    if settled.checkpoint is not None:
        new += [f"hydra.run.dir='{settled.run_dir}'", "hydra.output_subdir=null"]
    return _with_override(args, overrides, *new, replace=True), (
        settled.run_dir if settled.fresh else None
    )


def _key(override: str) -> str:
    return override.split("=", 1)[0]


def _info_before_overrides(args: list[str]) -> list[str]:
    """``--info key=value ...`` read as ``--info all key=value ...``: ``--info``'s value is
    optional, and argparse would take the override for it (and refuse it: not a choice)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg in ("--info", "-i") and "=" in (args[i + 1] if i + 1 < len(args) else ""):
            out.append("all")
    return out


def _is_hydra_key(key: str) -> bool:
    """Whether an override's key belongs to Hydra's own config (``hydra.*``, ``hydra/<group>``)."""
    return key == "hydra" or key.startswith(("hydra.", "hydra/"))


def _resume_value(overrides: list[str]) -> str | None:
    """The last ``resume=`` value of the command line (None: not given)."""
    values = [o.split("=", 1)[1] for o in overrides if _key(o) == "resume"]
    return values[-1] if values else None


def _with_override(
    args: list[str], overrides: list[str], *extra: str, replace: bool = False
) -> list[str]:
    """``args`` with ``extra`` joining the block of ``overrides`` (Hydra takes them as one block,
    whatever flags come before or after it), before them, or in their place (``replace``)."""
    n = len(overrides)
    for i in range(len(args) - n + 1):
        if n and args[i : i + n] == overrides:
            return [*args[:i], *extra, *args[i + n if replace else i :]]
    # first: last, they could be taken as the value of a flag before them (``--info``)
    return [*extra, *[a for a in args if not (replace and a in overrides)]]


def _resuming(overrides: list[str]) -> bool:
    """Whether the command line continues a given run (``resume=auto`` may start one)."""
    return _resume_value(overrides) not in (None, "", "null", "auto")


def _explicit_run_dir(overrides: list[str]) -> Path | None:
    """The run dir named by ``run_dir=`` or ``hydra.run.dir=`` (None if neither is given)."""
    for key in ("run_dir", "hydra.run.dir"):
        values = [o.split("=", 1)[1] for o in overrides if _key(o) == key]
        if values and values[-1] not in ("", "null"):
            return Path(values[-1].strip("'\"")).expanduser().resolve()
    return None
