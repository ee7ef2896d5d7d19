"""Command lines of the benchmarks: Hydra overrides (``key=value``) anywhere among the options."""

from __future__ import annotations

import argparse
import sys


def parse_with_overrides(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """``parser``'s options from ``sys.argv``, with every ``key=value`` word taken out first as a
    Hydra override (``args.overrides``): argparse would read ``--seeds 0 1 2 trainer=serial`` as a
    fourth seed."""
    argv = sys.argv[1:]
    overrides = [word for word in argv if "=" in word and not word.startswith("-")]
    args = parser.parse_args([word for word in argv if word not in overrides])
    args.overrides = [*args.overrides, *overrides]
    return args
