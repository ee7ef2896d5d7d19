"""What recording and the console cost the learner, as ratios against a baseline in the same run.

Runs the serial trainer (CartPole-v1, shipped DQN defaults) for the same opt steps with:
the TensorBoard recorder and no progress view (baseline), the progress view on, ``recorder=mlflow``
and ``recorder=both``; prints opt steps/s of each and its ratio to the baseline. Variants run
interleaved, ``--repeats`` times each, and the median is kept (this machine is shared and noisy).

    python benchmarks/recorder_overhead.py [--opts 3000] [--repeats 3] [overrides...]
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile

from hydra import compose, initialize_config_dir

from border_py import train
from border_py.config import config_dir

VARIANTS = {
    "tensorboard, progress off (baseline)": ["recorder=tensorboard", "progress=false"],
    "tensorboard, progress on": ["recorder=tensorboard", "progress=true", "progress_interval=1"],
    "mlflow, progress off": ["recorder=mlflow", "progress=false"],
    "both, progress off": ["recorder=both", "progress=false"],
}


def opt_rate(overrides: list[str], opts: int) -> float:
    """Opt steps per second of one serial run (evaluation and checkpoints kept out of the way)."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        initialize_config_dir(version_base="1.3", config_dir=str(config_dir())),
    ):
        cfg = compose(
            "train",
            overrides=[
                "trainer=serial",
                f"run_dir={tmp}",
                f"trainer.max_opts={opts}",
                f"trainer.eval_interval={opts}",
                "trainer.eval_episodes=1",
                "trainer.save_interval=0",
                *overrides,
            ],
        )
        summary = train(cfg)
    return summary["opt_steps"] / summary["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opts", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rates: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeats):
        for name, overrides in VARIANTS.items():
            rates[name].append(opt_rate([*overrides, *args.overrides], args.opts))
    baseline = statistics.median(rates[next(iter(VARIANTS))])
    print(f"{'variant':<40} {'opt steps/s':>12} {'ratio':>7}")
    ratios = {}
    for name, values in rates.items():
        median = statistics.median(values)
        ratios[name] = round(median / baseline, 3)
        print(f"{name:<40} {median:>12.0f} {median / baseline:>7.2f}")
    print("RESULT " + json.dumps({"opt_rate_ratio_vs_baseline": ratios}))


if __name__ == "__main__":
    main()
