"""Time to solve CartPole-v1 with border-py's shipped defaults, per seed.

Prints, for each seed, the env steps, opt steps and wall-clock seconds (from the start of training,
evaluation included) to the first evaluation with ``eval/return_mean >= 475``, the anchor of
``../shared/bench/sb3_dqn_cartpole.py``. Run SB3's script back to back with this one: this
machine's speed drifts, only figures taken in one session compare.

    python benchmarks/time_to_solve.py --seeds 0 1 2 [extra Hydra overrides...]
"""

from __future__ import annotations

import argparse
import logging
import tempfile

from hydra import compose, initialize_config_dir

from border_py import train
from border_py.config import config_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="+", default=["0", "1", "2"])
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. trainer=serial")
    args = parser.parse_args()
    # `--seeds 0 1 2 trainer=serial` is read as seeds 0 1 2 and one override
    args.overrides = [s for s in args.seeds if not s.isdigit()] + args.overrides
    args.seeds = [int(s) for s in args.seeds if s.isdigit()]
    logging.basicConfig(level=logging.WARNING)
    rows = []
    for seed in args.seeds:
        with (
            tempfile.TemporaryDirectory() as tmp,
            initialize_config_dir(version_base="1.3", config_dir=str(config_dir())),
        ):
            cfg = compose(
                "train",
                overrides=[
                    f"seed={seed}",
                    f"run_dir={tmp}",
                    f"trainer.target_return={args.target}",
                    *args.overrides,
                ],
            )
            summary = train(cfg)
        hit = summary["solved_at"]
        rows.append((seed, hit))
        solved = (
            f"{hit['env_steps']:>7d} env steps {hit['opt_steps']:>7d} opt steps {hit['seconds']:6.1f} s"
            if hit
            else "not solved"
        )
        print(f"seed {seed}: {solved} (best {summary['best_return']:.1f})", flush=True)
    solved = [h for _, h in rows if h]
    if solved:
        mean_s = sum(h["seconds"] for h in solved) / len(solved)
        mean_steps = sum(h["env_steps"] for h in solved) / len(solved)
        print(f"solved {len(solved)}/{len(rows)}: mean {mean_steps:.0f} env steps, {mean_s:.1f} s")


if __name__ == "__main__":
    main()
