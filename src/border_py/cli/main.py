"""The ``border`` command: ``train``, ``eval``, ``report``, ``tune`` and ``export`` subcommands."""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys

from border_py._version import __version__
from border_py.cli.completion import FLAGS, shell_completion
from border_py.cli.errors import fail
from border_py.config import closest
from border_py.errors import TextFormatter
from border_py.processes.children import warm_forkserver
from border_py.processes.signals import StopSignals

__all__ = ["COMMANDS", "main"]

USAGE = """\
usage: border <command> [options] [overrides]

Asynchronous multi-process off-policy deep RL, driven by Hydra configs.

commands:
  train     train an agent (a Hydra app: key=value overrides, group=option, -m for sweeps)
  eval      evaluate a saved policy: border eval <run dir | checkpoint dir> [eval.*/env.* overrides]
  report    compare runs: border report <run or sweep dir> [--x env_steps|opt_steps|seconds] [--csv FILE]
  tune      tune hyper-parameters with Optuna: border tune <space> [--n-trials N] [--n-jobs N] [overrides]
  export    export a policy: border export <run dir | checkpoint dir> --format onnx|torchscript|numpy -o PATH
  push      share a run's policy on the Hugging Face Hub: border push <run> --repo <owner/name> [--dry-run DIR]
  pull      download a shared policy: border pull <owner/name> [-o DIR] [--revision REV]

options:
  -h, --help       this help
  -V, --version    border-py's version

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
  border tune dqn_cartpole --n-trials 50                             # Optuna, pruned trials
  border export outputs/<date>/<time> --format numpy -o policy       # numpy alone runs it
  eval "$(border train -sc install=bash)"      # tab completion (also zsh, fish)

Outputs (TensorBoard logs in tensorboard/, checkpoints/, train.log) land in outputs/<date>/<time>/.
"""


COMMANDS = ("train", "eval", "report", "tune", "export", "push", "pull")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``border`` console script.

    Output piped into a program that stops reading (``border --help | head``) ends quietly.
    With ``argv`` None (the console script, ``python -m border_py.cli``), the process's heap is
    frozen at its exit (``gc.freeze``: a faster exit).
    """
    if argv is None:  # the command's own process (not a caller's, whose heap is its own)
        # The interpreter's exit runs full garbage collections over every object left, torch's
        # included (benchmarks/start_stop.py); frozen, they are skipped. Exit handlers run last
        # registered first, so the ones registered earlier (multiprocessing's, logging's) still
        # run after this one.
        atexit.register(gc.freeze)
    args = sys.argv[1:] if argv is None else argv
    # commands without a log handler of their own (eval, report, export) warn through logging's
    # last resort: its lines are plain text too
    if logging.lastResort is not None:
        logging.lastResort.setFormatter(TextFormatter())
    # a Ctrl-C from now on is a graceful stop of the run (of train and tune, which stop
    # gracefully; eval and report stop at the first one)
    signals = StopSignals.acquire() if args[:1] in (["train"], ["tune"]) else None
    try:
        status = _dispatch(args)
        sys.stdout.flush()
    except KeyboardInterrupt:  # a second Ctrl-C, or one before the run could start
        return fail("interrupted", 130)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # no second error when Python flushes at exit
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        if signals is not None:
            signals.release()
    return status


def _dispatch(args: list[str]) -> int:
    if not args:
        print(USAGE, file=sys.stderr)
        return 2
    if args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if args[0] in ("-V", "--version"):
        print(f"border-py {__version__}")
        return 0
    command, rest = args[0], args[1:]
    # border train -sc install=bash, and the query its script runs: border -sc query=bash
    if command in FLAGS or (command == "train" and set(FLAGS) & set(rest)):
        return shell_completion(args if command in FLAGS else rest, COMMANDS)
    if command == "train":
        if _runs_actor_processes(rest):
            warm_forkserver()  # it imports torch on another core while this process does
        from border_py.cli.train import train_command

        return train_command(rest)
    if command == "eval":
        from border_py.cli.eval import eval_command

        return eval_command(rest)
    if command == "report":
        from border_py.cli.report import report_command

        return report_command(rest)
    if command == "tune":
        from border_py.cli.tune import tune_command

        return tune_command(rest)
    if command == "export":
        from border_py.cli.export import export_command

        return export_command(rest)
    if command in ("push", "pull"):
        from border_py.cli.push import pull_command, push_command

        return push_command(rest) if command == "push" else pull_command(rest)
    return fail(
        f"unknown command '{command}'{closest(command, COMMANDS)}; commands: {', '.join(COMMANDS)}"
    )


def _runs_actor_processes(args: list[str]) -> bool:
    """Whether ``border train <args>`` is about to start actor processes from the forkserver here:
    one async run (not serial, spawn, a sweep, help or a printed config)."""
    quick = {"-m", "--multirun", "--help", "-h", "--hydra-help", "--cfg", "-c", "--info", "-i"}
    if (quick | {"--version"}) & set(args):
        return False
    return not {"trainer=serial", "actor_manager.start_method=spawn"} & set(args)
