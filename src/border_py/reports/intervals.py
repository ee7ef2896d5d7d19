"""Confidence intervals of the mean and of the IQM over seeds, named by their method.

Few seeds are the rule in RL, and a bootstrap of the mean is too narrow there: with 3 normal
seeds a percentile bootstrap covers the true mean about 75% of the time, not 95% (resampled means
never leave the seeds' range), and BCa is no better; both stay below the t-interval up to 30
seeds and catch up with it only around 50. So the interval of the mean depends on the number of
seeds ``n``:

- ``n < BOOTSTRAP_FROM`` (50): Student's t-interval, ``mean ± t(0.975, n-1) s / sqrt(n)`` (what
  SciPy's ``stats.t.interval`` gives): exact for normal scores at any ``n`` from 2;
- ``n >= BOOTSTRAP_FROM``: a BCa bootstrap (SciPy's ``stats.bootstrap``, bias-corrected and
  accelerated), which covers as well as the t-interval there and follows skewed scores
  (an asymmetric interval);
- one seed: no interval (NaN bounds, method :data:`NO_INTERVAL`).

The IQM (interquartile mean: the mean of the middle 50%, 25% cut at each end as SciPy's
``stats.trim_mean`` and rliable cut) gets a percentile bootstrap of that trimmed mean, as rliable
computes it; with fewer than 4 seeds nothing is cut, the IQM is the mean and that interval is the
percentile bootstrap of the mean, with its low coverage. ``benchmarks/interval_coverage.py``
measures the coverage of both (docs/02-guide/reports.md quotes it). Bootstraps are seeded: the
same scores always give the same interval.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

__all__ = [
    "BCA_BOOTSTRAP",
    "BOOTSTRAP_FROM",
    "BOOTSTRAP_SEED",
    "CONFIDENCE",
    "NO_INTERVAL",
    "PERCENTILE_BOOTSTRAP",
    "RESAMPLES",
    "T_INTERVAL",
    "Interval",
    "bootstrap_interval",
    "iqm_interval",
    "mean_interval",
    "t_interval",
    "trimmed_iqm",
]

CONFIDENCE = 0.95
BOOTSTRAP_FROM = 50  # seeds from which the mean's interval is a BCa bootstrap, not a t-interval
RESAMPLES = 10_000
BATCH = 500  # resamples drawn at a time: memory of columns x seeds x BATCH, not x RESAMPLES
BOOTSTRAP_SEED = 0  # the same runs always give the same interval
T_INTERVAL = "95% t-interval"
BCA_BOOTSTRAP = "95% BCa bootstrap"
PERCENTILE_BOOTSTRAP = "95% percentile bootstrap"
NO_INTERVAL = "none (1 seed)"


@dataclass(frozen=True)
class Interval:
    """Per column of scores, the interval's bounds (NaN when there is none) and its method."""

    low: np.ndarray
    high: np.ndarray
    method: str


def trimmed_iqm(values: np.ndarray, axis: int = 0) -> np.ndarray:
    """Interquartile mean along ``axis`` (SciPy's ``trim_mean``, 25% cut at each end)."""
    return np.asarray(stats.trim_mean(values, 0.25, axis=axis))


def _columns(values: Any) -> np.ndarray:
    """Scores as a float array of shape (seeds, columns)."""
    array = np.asarray(values, dtype=float)
    return array[:, None] if array.ndim == 1 else array


def t_interval(values: Any) -> Interval:
    """Student's t-interval of the mean over axis 0 (seeds), per column (at least 2 seeds)."""
    array = _columns(values)
    n = array.shape[0]
    mean = array.mean(axis=0)
    sem = array.std(axis=0, ddof=1) / np.sqrt(n)
    half = stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * sem  # = stats.t.interval's half width
    return Interval(mean - half, mean + half, T_INTERVAL)


def bootstrap_interval(values: Any, statistic: Any, method: str) -> Interval:
    """A seeded SciPy bootstrap interval of ``statistic(values, axis)`` over axis 0, per column;
    ``method``: ``"BCa"`` or ``"percentile"``. A column whose seeds all agree has that value as
    both bounds (BCa is undefined there)."""
    array = _columns(values)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate (constant) columns: NaN, replaced below
        result = stats.bootstrap(
            (array,),
            statistic,
            axis=0,
            confidence_level=CONFIDENCE,
            n_resamples=RESAMPLES,
            batch=BATCH,
            method=method,
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
    value = statistic(array, axis=0)
    constant = np.all(array == array[0], axis=0)
    low = np.where(constant, value, result.confidence_interval.low)
    high = np.where(constant, value, result.confidence_interval.high)
    label = BCA_BOOTSTRAP if method == "BCa" else PERCENTILE_BOOTSTRAP
    return Interval(np.asarray(low, dtype=float), np.asarray(high, dtype=float), label)


def _none(array: np.ndarray) -> Interval:
    nan = np.full(array.shape[1], np.nan)
    return Interval(nan, nan.copy(), NO_INTERVAL)


def mean_interval(values: Any) -> Interval:
    """The 95% interval of the mean over axis 0 (seeds), per column: a t-interval below
    :data:`BOOTSTRAP_FROM` seeds, a BCa bootstrap from there, none for one seed."""
    array = _columns(values)
    if array.shape[0] < 2:
        return _none(array)
    if array.shape[0] < BOOTSTRAP_FROM:
        return t_interval(array)
    return bootstrap_interval(array, np.mean, "BCa")


def _iqm_statistic(values: np.ndarray, axis: int = 0) -> np.ndarray:
    return trimmed_iqm(values, axis=axis)


def iqm_interval(values: Any) -> Interval:
    """The 95% percentile-bootstrap interval of the IQM over axis 0 (seeds), per column; none for
    one seed."""
    array = _columns(values)
    if array.shape[0] < 2:
        return _none(array)
    return bootstrap_interval(array, _iqm_statistic, "percentile")
