"""How often ``border report``'s 95% intervals cover the truth, on synthetic seeds.

For each distribution of returns (normal; gamma with shape 4, skewness 1; gamma with shape 2,
skewness 1.4) and each number of seeds ``n``, it draws ``--experiments`` samples of ``n`` scores
(seeded) and counts how often each interval holds the distribution's true value:

- ``mean``: the interval ``border report`` gives the mean (a t-interval below 50 seeds, a BCa
  bootstrap from 50: :func:`border_py.reports.intervals.mean_interval`);
- ``t-interval``: Student's t-interval of the mean at every ``n``;
- ``percentile``: the percentile bootstrap of the mean that ``border report`` used before;
- ``BCa``: the BCa bootstrap of the mean at every ``n``;
- ``IQM``: the percentile bootstrap of the IQM (:func:`border_py.reports.intervals.iqm_interval`),
  against the distribution's interquartile mean.

    python benchmarks/interval_coverage.py [--experiments 2000] [--seeds 3 5 10 20 30 50]

It prints a Markdown table of coverages (in %) and ends with one ``RESULT {json}`` line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from border_py.reports.intervals import (
    Interval,
    bootstrap_interval,
    iqm_interval,
    mean_interval,
    t_interval,
)

DISTRIBUTIONS = {
    "normal": stats.norm(100.0, 30.0),
    "gamma(4)": stats.gamma(4.0, scale=25.0),
    "gamma(2)": stats.gamma(2.0, scale=25.0),
}
COLUMNS_AT_ONCE = 200  # experiments per bootstrap call (memory: columns x seeds x resamples)


def _interquartile_mean(distribution: Any) -> float:
    q1, q3 = distribution.ppf(0.25), distribution.ppf(0.75)
    return float(distribution.expect(lambda x: x, lb=q1, ub=q3) / 0.5)


def coverage(
    interval: Callable[[np.ndarray], Interval], samples: np.ndarray, truth: float
) -> float:
    """The share of columns of ``samples`` whose interval holds ``truth``."""
    hits = 0
    for start in range(0, samples.shape[1], COLUMNS_AT_ONCE):
        found = interval(samples[:, start : start + COLUMNS_AT_ONCE])
        hits += int(np.sum((found.low <= truth) & (truth <= found.high)))
    return hits / samples.shape[1]


def main() -> None:
    """Measure and print the coverages."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[3, 5, 10, 20, 30, 50])
    args = parser.parse_args()
    methods: dict[str, Callable[[np.ndarray], Interval]] = {
        "mean": mean_interval,
        "t-interval": t_interval,
        "percentile": lambda v: bootstrap_interval(v, np.mean, "percentile"),
        "BCa": lambda v: bootstrap_interval(v, np.mean, "BCa"),
        "IQM": iqm_interval,
    }
    print("| returns | seeds | " + " | ".join(methods) + " |")
    print("|---|---:|" + "---:|" * len(methods))
    result: dict[str, dict[str, dict[str, float]]] = {}
    for name, distribution in DISTRIBUTIONS.items():
        truths = {"IQM": _interquartile_mean(distribution)}
        for n in args.seeds:
            rng = np.random.default_rng(n)
            samples = distribution.rvs(size=(n, args.experiments), random_state=rng)
            found = {
                method: 100 * coverage(interval, samples, truths.get(method, distribution.mean()))
                for method, interval in methods.items()
            }
            result.setdefault(name, {})[str(n)] = {k: round(v, 1) for k, v in found.items()}
            print(f"| {name} | {n} | " + " | ".join(f"{v:.1f}" for v in found.values()) + " |")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
