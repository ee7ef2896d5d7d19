"""The ``border`` command: subcommands over a Hydra application.

``border train [overrides]`` is a Hydra app (``--help``, ``--cfg job``, ``-m`` work as in any Hydra
app). Before Hydra runs, overrides are checked against the shipped configs so that a typo in a
group option or key fails with one line that names the closest valid choices.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import ClassVar

import hydra
from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from border_py.checkpoint import find_checkpoint, run_dir_of_checkpoint
from border_py.config import ConfigError, closest, config_dir, group_options, parse_overrides
from border_py.eval_command import EVAL_DEFAULTS, evaluate_checkpoint, print_result
from border_py.lifecycle import RunError
from border_py.report import report
from border_py.results import read_result, write_result
from border_py.train import prepare, train

log = logging.getLogger("border_py")

USAGE = """\
usage: border <command> [options] [overrides]

Asynchronous multi-process off-policy deep RL, driven by Hydra configs.

commands:
  train     train an agent (a Hydra app: key=value overrides, group=option, -m for sweeps)
  eval      evaluate a saved policy: border eval <run dir | checkpoint dir> [eval.*/env.* overrides]
  report    compare runs: border report <run or sweep dir> [--csv FILE] [--plot FILE]

examples:
  border train                                         # DQN on CartPole-v1 with the defaults
  border train agent=dqn env=cartpole seed=1
  border train env=gym env.id=Acrobot-v1 trainer.max_opts=50000
  border train -m agent.lr=1e-3,3e-4 seed=0,1,2        # multirun sweep
  border train --help                                  # config groups, options and keys
  border train --cfg job                               # print the composed config
  border train resume=outputs/<date>/<time> trainer.max_opts=50000   # continue a run
  border eval outputs/<date>/<time> eval.n_episodes=20 eval.video=true
  border report outputs/multirun/<date>/<time> --csv sweep.csv      # table + report.png

Outputs (TensorBoard logs in tensorboard/, checkpoints/, train.log) land in outputs/<date>/<time>/.
"""


COMMANDS = ("train", "eval", "report")
EVAL_USAGE = f"""\
usage: border eval <run dir | checkpoint dir> [overrides]

Plays greedy episodes with a saved policy (a run dir: its best checkpoint), prints a table and
writes eval_<timestamp>.json next to the checkpoint. Overrides: eval.<key>=value (defaults:
{", ".join(f"{k}={v}" for k, v in EVAL_DEFAULTS.items())}) and env.<key>=value.
"""


def fail(message: str, status: int = 2) -> int:
    """Print one error line for ``border`` and return ``status`` (2: bad input, 1: a failed run)."""
    print(f"border: error: {message}", file=sys.stderr)
    return status


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
    """``border train``: validate the overrides, then hand over to Hydra."""
    parsed = get_args_parser().parse_args(args)
    custom_config = parsed.config_name or parsed.config_path or parsed.config_dir
    if not (parsed.help or parsed.hydra_help or custom_config):
        try:
            check_overrides(parsed.overrides)
        except ConfigError as exc:
            return fail(str(exc))
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


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``border`` console script."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(USAGE, file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    command, rest = args[0], args[1:]
    if command == "train":
        return train_command(rest)
    if command == "eval":
        return eval_cli(rest)
    if command == "report":
        return report_cli(rest)
    return fail(
        f"unknown command '{command}'{closest(command, COMMANDS)}; commands: {', '.join(COMMANDS)}"
    )


def eval_cli(args: list[str]) -> int:
    """``border eval``: evaluate a checkpoint and print a table."""
    if not args or args[0] in ("-h", "--help"):
        print(EVAL_USAGE)
        return 0 if args else 2
    try:
        print_result(*evaluate_checkpoint(args[0], args[1:]))
    except ConfigError as exc:
        return fail(str(exc))
    return 0


def report_cli(args: list[str]) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
