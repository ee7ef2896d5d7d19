"""Train TinyQ on Corridor from Python: ``python examples/train_tiny_q.py [overrides]``.

Python puts this script's directory (examples/) on sys.path, so ``tiny_rl`` imports here and in
the actor processes. Everything that trains sits under ``if __name__ == "__main__":``: the actor
and evaluator processes start with forkserver (the default) or spawn, and those import this
script as their main module; unguarded, each child would start a training of its own.
"""

from __future__ import annotations

import sys

from hydra import compose, initialize_config_dir

from border_py import train
from border_py.config import config_dir
from border_py.recorders.console import summary_table


def main(overrides: list[str]) -> dict:
    """Compose border's ``train`` config with tiny_rl's configs on the search path and train."""
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        cfg = compose(
            "train",
            overrides=[
                "hydra.searchpath=[pkg://tiny_rl.conf]",
                "experiment=tiny_q_corridor",
                "run_dir=runs/tiny_q",
                *overrides,
            ],
        )
    return train(cfg)


if __name__ == "__main__":
    print(summary_table(main(sys.argv[1:])))
