"""``border export <run dir | checkpoint dir> --format onnx|torchscript|numpy -o PATH``: write
the greedy policy as a model that runs without border-py (see :mod:`border_py.deploy.export`)."""

from __future__ import annotations

import argparse

from border_py.cli.errors import OneLineParser, fail
from border_py.config import flag
from border_py.deploy.export import FORMATS, export_policy
from border_py.errors import ConfigError, RunError
from border_py.overrides import parse_overrides

__all__ = ["export_command"]

EXPORT_USAGE = f"""\
usage: border export <run dir | checkpoint dir> --format {{{",".join(FORMATS)}}} -o PATH [--force] [trust=[my_pkg]] [check_resources=false]

Writes the greedy policy (a run dir: its best checkpoint, else its newest) as a model mapping a
batch of observations to (action, values), checked against the policy before it is published:
  onnx         one file (needs pip install 'border-py[export]'); run it with onnxruntime
  torchscript  one file; torch.jit.load runs it without border-py
  numpy        a dir: policy.py runs the weights with numpy alone (no torch, no border-py)
preprocessing.json (the env, its wrappers, the observations and actions) goes beside the model:
<file>.preprocessing.json beside a file, inside the numpy dir. An existing output is replaced only
with --force (an earlier export; never a symlink). trust=[my_pkg]: the packages, modules or classes
of your own that the run's config may import (a run dir is data). check_resources=false: build the
policy's networks even when they look larger than the memory available.
"""


def parse(args: list[str]) -> tuple[argparse.Namespace, object]:
    """The parsed arguments (``check_resources`` among them: true unless overridden) and the
    ``trust`` override's value (None without one).

    Raises:
        ConfigError: a missing or unknown argument, or an override other than ``trust`` and
            ``check_resources``.
    """
    parser = OneLineParser(prog="border export", add_help=False)
    parser.add_argument("path")
    parser.add_argument("overrides", nargs="*", default=[])
    parser.add_argument("--format", "-f", dest="fmt", required=True)
    parser.add_argument("--output", "-o", dest="out", required=True)
    parser.add_argument("--force", action="store_true")
    parsed = parser.parse_intermixed_args(args)
    trust: object = None
    parsed.check_resources = True
    for override in parse_overrides(parsed.overrides):
        if override.key_or_group == "check_resources":
            parsed.check_resources = override.value()
            flag("check_resources", parsed.check_resources)
            continue
        if override.key_or_group != "trust":
            raise ConfigError(
                f"{override.key_or_group}: border export takes --format, -o, --force, trust=[...]"
                " and check_resources=false"
            )
        trust = override.value()
    return parsed, trust


def export_command(args: list[str]) -> int:
    """``border export``: write the policy, print where."""
    if args[:1] in (["-h"], ["--help"]):
        print(EXPORT_USAGE)
        return 0
    try:
        parsed, trust = parse(args)
        out = export_policy(
            parsed.path,
            parsed.fmt,
            parsed.out,
            trust=trust,
            force=parsed.force,
            check_resources=parsed.check_resources,
        )
    except ConfigError as exc:
        return fail(str(exc))
    except RunError as exc:
        return fail(str(exc), 1)
    print(f"written: {out}", flush=True)
    return 0
