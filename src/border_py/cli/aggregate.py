"""Aggregates over the seeds of one configuration, as ``border report`` shows them.

For a set of scores (one per seed): the mean with a 95% percentile-bootstrap confidence interval
(SciPy's ``stats.bootstrap``) and the interquartile mean (IQM: the mean of the middle 50%, SciPy's
``stats.trim_mean`` with 25% cut at each end, as rliable computes it; with fewer than 4 seeds
nothing is cut and it equals the mean). Curves are aggregated point by point on a common x grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # the same runs always give the same band


@dataclass(frozen=True)
class Estimate:
    """Aggregate of one score over ``n`` seeds (``low``/``high``: the confidence interval of the
    mean; equal to it when there is a single seed)."""

    mean: float
    low: float
    high: float
    iqm: float
    n: int


def iqm(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Interquartile mean along ``axis``."""
    return np.asarray(stats.trim_mean(values, 0.25, axis=axis))


def mean_interval(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 95% percentile-bootstrap interval of the mean over axis 0 (seeds), per column."""
    if values.shape[0] < 2 or np.all(values == values[0]):
        mean = values.mean(axis=0)
        return mean, mean
    result = stats.bootstrap(
        (values,),
        np.mean,
        axis=0,
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return result.confidence_interval.low, result.confidence_interval.high


def estimate(scores: list[float]) -> Estimate:
    """Mean, its 95% bootstrap interval, and IQM of one score per seed."""
    values = np.asarray(scores, dtype=float)[:, None]
    low, high = mean_interval(values)
    return Estimate(
        float(values.mean()), float(low[0]), float(high[0]), float(iqm(values)[0]), len(scores)
    )


@dataclass(frozen=True)
class Band:
    """A curve aggregated over seeds: at each ``x``, the mean, its interval and the IQM."""

    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    iqm: np.ndarray
    n: int


def aggregate_curves(curves: list[list[tuple[float, float]]]) -> Band | None:
    """Aggregate (x, y) curves, one per seed, from the first x where every seed has evaluated.

    The grid is every x of any curve from there on; each curve is linearly interpolated onto it
    (the evaluations of different seeds fall at different env steps or seconds), and a curve
    that ended earlier keeps its last value (the policy its run ended with). None without curves.
    """
    curves = [sorted(c) for c in curves if c]
    if not curves:
        return None
    start = max(c[0][0] for c in curves)
    grid = np.array(sorted({x for c in curves for x, _ in c if x >= start}), dtype=float)
    values = np.stack(
        [np.interp(grid, [x for x, _ in c], [y for _, y in c]) for c in curves]
    )  # (seeds, points)
    low, high = mean_interval(values)
    return Band(grid, values.mean(axis=0), low, high, iqm(values), len(curves))
