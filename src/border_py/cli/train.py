"""``border train [overrides]``: a Hydra app (``--help``, ``--cfg job``, ``-m`` work as in any Hydra
app). Before Hydra runs, overrides are checked against the shipped configs so that a typo in a
group option or key fails with one line that names the closest valid choices.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from border_py.cli.errors import fail
from border_py.cli.hydra_callbacks import report_sweep
from border_py.cli.recipes import lookup
from border_py.config import closest, config_dir, group_options
from border_py.errors import ConfigError, RunError
from border_py.overrides import parse_overrides
from border_py.runs.checkpoint import find_checkpoint, run_dir_of_checkpoint
from border_py.runs.results import read_result, write_result
from border_py.runs.run_dir import newest_checkpoint, set_aside_attempt
from border_py.trainers.train import prepare, train

log = logging.getLogger("border_py")


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
def _hydra_train(cfg: DictConfig) -> float:
    """Hydra task function: train and return the objective.

    A single run turns errors into one line (exit 2: config, 1: run) and Ctrl-C into exit 130.
    In a multirun, a failing job is recorded as failed in its run dir (``result.json``, and its
    traceback in the job's log) and returns NaN, so the sweep goes on; Ctrl-C ends the sweep.
    """
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
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
    if read_result(run_dir) is None:  # train() records the failures of a started run itself
        write_result(run_dir, "failed", error=exc, overrides=list(HydraConfig.get().overrides.task))
    return float("nan")


def _values(override: Override) -> list[str]:
    """The override's values as strings: one, every value of a sweep, or none for a sweep that is
    not a list (an Optuna ``interval(...)``: its values are the sweeper's to draw)."""
    if not override.is_sweep_override():
        return [override.get_value_element_as_str()]
    try:
        return list(override.sweep_string_iterator())
    except (HydraException, TypeError, ValueError):
        return []


def check_overrides(overrides: list[str]) -> None:
    """Raise :class:`ConfigError` for an unparsable override, an unknown group option or key, or a bad value.

    Every value of a sweep is checked (with the first value of every other override), so that a
    typo fails at once rather than in the middle of a sweep.
    """
    parsed = parse_overrides(overrides)
    choices: list[str] = []
    group_sweeps: list[tuple[int, str, list[str]]] = []  # (index in choices, group, other values)
    keys: list[Override] = []
    others: list[str] = []  # +key=value and ~key: Hydra checks them; they join the composition
    for ov in parsed:
        name = ov.key_or_group
        if name.startswith("hydra"):
            continue
        if ov.type in (OverrideType.ADD, OverrideType.FORCE_ADD, OverrideType.DEL):
            if not ov.is_sweep_override():
                others.append(ov.input_line)
            continue
        if name in group_dirs():
            options = group_options(name)
            values = _values(ov)
            for value in values:
                if value not in options:
                    raise ConfigError(
                        f"{name}={value}: unknown option of config group '{name}'{closest(value, options)};"
                        f" choose from: {', '.join(options)}"
                    )
            if len(values) > 1:
                group_sweeps.append((len(choices), name, values[1:]))
            choices.append(f"{name}={values[0]}")
        else:
            keys.append(ov)
    cfg = _compose(choices)
    for ov in keys:
        node: object = cfg
        path: list[str] = []
        parts = ov.key_or_group.split(".")
        for depth, part in enumerate(parts):
            if not isinstance(node, DictConfig) or part not in node.keys():  # noqa: SIM118 (`in` is False for ??? values)
                where = ".".join(path) or "the top level"
                valid = list(node.keys()) if isinstance(node, DictConfig) else []
                raise ConfigError(
                    f"{ov.key_or_group}: unknown key '{part}' in {where}{closest(part, valid)};"
                    f" valid keys: {', '.join(str(k) for k in valid)}"
                    " (use +key=value to add a new one)"
                )
            if depth < len(parts) - 1:
                node = node[part]
            path.append(part)
    checked = [ov for ov in keys if _values(ov)]
    first_values = [f"{ov.key_or_group}={_values(ov)[0]}" for ov in checked]
    final = [*choices, *first_values, *others]
    prepare(_compose(final), overrides=final)
    for i, ov in enumerate(checked):  # the other values of each swept key
        for value in _values(ov)[1:]:
            variant = [*first_values[:i], f"{ov.key_or_group}={value}", *first_values[i + 1 :]]
            prepare(_compose([*choices, *variant, *others]), overrides=variant)
    for i, name, values in group_sweeps:  # the other options of each swept group
        for value in values:
            variant = [*choices[:i], f"{name}={value}", *choices[i + 1 :]]
            try:
                prepare(_compose([*variant, *first_values, *others]), overrides=variant)
            except ConfigError as exc:
                raise ConfigError(f"with {name}={value}: {exc}") from None


def _compose(overrides: list[str]) -> DictConfig:
    """The ``train`` config with ``overrides``, Hydra's errors as one :class:`ConfigError` line."""
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir()), job_name="check"):
        try:
            return compose(config_name="train", overrides=overrides)
        except (HydraException, OmegaConfBaseException) as exc:
            first = str(exc).splitlines()[0]
            if "hydra/sweeper" in first:
                first += (
                    " (hparams_search needs the Optuna sweeper: pip install 'border-py[sweep]')"
                )
            raise ConfigError(first) from None


def group_dirs() -> list[str]:
    """Names of the config groups shipped with border-py (their directories)."""
    return sorted(p.name for p in config_dir().iterdir() if p.is_dir())


def train_command(args: list[str]) -> int:
    """``border train``: settle ``resume=``, validate the overrides, then hand over to Hydra."""
    parsed = get_args_parser().parse_args(args)
    try:
        args, fresh_in = _settle_resume(args, parsed.overrides)
    except ConfigError as exc:
        return fail(str(exc))
    except RunFinished as done:
        print(f"border: {done}", file=sys.stderr)
        return 0
    parsed = get_args_parser().parse_args(args)
    custom_config = parsed.config_name or parsed.config_path or parsed.config_dir
    recipe = None if custom_config or _resuming(parsed.overrides) else lookup(parsed.overrides)
    if recipe is not None:  # RL Zoo's rule: the task's recipe, under the command line's keys
        # beside the command line's overrides (Hydra's parser wants them in one run, not split
        # by an option such as --cfg job)
        at = args.index(parsed.overrides[0]) if parsed.overrides else len(args)
        args = [*args[:at], f"experiment={recipe}", *args[at:]]
        parsed = get_args_parser().parse_args(args)
        print(
            f"border: recipe experiment={recipe} (your key=value overrides win;"
            " experiment=null trains without it)",
            file=sys.stderr,
        )
    if not (parsed.help or parsed.hydra_help or custom_config):
        try:
            check_overrides(parsed.overrides)
        except ConfigError as exc:
            return fail(str(exc))
    if fresh_in is not None:  # resume=auto with no checkpoint: start fresh there
        moved = set_aside_attempt(fresh_in)
        if moved is not None:
            log.warning(
                "resume=auto: no complete checkpoint in %s; earlier files moved to %s",
                fresh_in,
                moved,
            )
    sys.argv = ["border train", *args]
    _hydra_train()
    return report_sweep()


def _settle_resume(args: list[str], overrides: list[str]) -> tuple[list[str], Path | None]:
    """Turn ``resume=auto`` into ``resume=<newest checkpoint>`` or ``resume=null``, and point
    Hydra at a resumed run's own dir (keeping its ``.hydra/`` as the original run wrote it).

    Returns the new arguments and, for ``resume=auto`` without a checkpoint, the dir the fresh
    run starts in (where an earlier attempt's files are to be set aside).
    """
    values = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "resume"]
    target = values[-1] if values else None
    if target in (None, "", "null"):
        return args, None
    fresh_in = None
    if target == "auto":
        run_dir = _explicit_run_dir(overrides)
        if run_dir is None:
            raise ConfigError(
                "resume=auto: needs the dir to continue in: run_dir=<dir> (or hydra.run.dir=<dir>),"
                " the same for every attempt of a requeued job"
            )
        checkpoint = newest_checkpoint(run_dir) if run_dir.is_dir() else None
        if checkpoint is not None and (read_result(run_dir) or {}).get("status") == "completed":
            raise RunFinished(
                f"resume=auto: the run in {run_dir} has completed; nothing to do (to train it"
                f" further: resume={run_dir} trainer.max_opts=<more>)"
            )
        target = "null" if checkpoint is None else str(checkpoint)
        args = [a for a in args if a.split("=", 1)[0] != "resume"] + [f"resume={target}"]
        if checkpoint is None:
            return args, run_dir
    run_dir = run_dir_of_checkpoint(find_checkpoint(target))
    return [*args, f"hydra.run.dir='{run_dir}'", "hydra.output_subdir=null"], fresh_in


def _resuming(overrides: list[str]) -> bool:
    values = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "resume"]
    return bool(values) and values[-1] not in ("", "null")


class RunFinished(Exception):
    """``resume=auto`` found a run that already completed (a requeued job after its end)."""


def _explicit_run_dir(overrides: list[str]) -> Path | None:
    """The run dir named by ``run_dir=`` or ``hydra.run.dir=`` (None if neither is given)."""
    for key in ("run_dir", "hydra.run.dir"):
        values = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key]
        if values and values[-1] not in ("", "null"):
            return Path(values[-1].strip("'\"")).expanduser().resolve()
    return None
