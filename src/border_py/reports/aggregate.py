"""Aggregates over the seeds of one configuration, as ``border report`` shows them.

Runs whose overrides differ only in ``seed`` form a :class:`Group`. For a set of scores (one per
seed): the mean with a 95% percentile-bootstrap confidence interval (SciPy's ``stats.bootstrap``)
and the interquartile mean (IQM: the mean of the middle 50%, SciPy's ``stats.trim_mean`` with 25%
cut at each end, as rliable computes it; with fewer than 4 seeds nothing is cut and it equals the
mean). Curves are aggregated point by point on a common x grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from border_py.reports.collect import RunRow, shared

CONFIDENCE = 0.95
RESAMPLES = 10_000
BOOTSTRAP_SEED = 0  # the same runs always give the same band
GROUP_COLUMNS = (
    "group",
    "seeds",
    "final_mean",
    "final_ci_low",
    "final_ci_high",
    "final_iqm",
    "best_mean",
    "best_ci_low",
    "best_ci_high",
    "best_iqm",
    "env_steps_mean",
    "failed",
    "jobs",
)


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


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


@dataclass
class Group:
    """Runs whose overrides differ only in ``seed``.

    Attributes:
        overrides: the overrides of its runs, ``seed`` left out.
        runs: every run of the group.
        label: what sets it apart from the other groups (filled by :func:`group_runs`).
    """

    overrides: tuple[str, ...]
    runs: list[RunRow]
    label: str = ""

    @property
    def scored(self) -> list[RunRow]:
        """The runs with at least one evaluation (the seeds the aggregates are over)."""
        return [row for row in self.runs if row.final_return is not None]

    def final(self) -> Estimate | None:
        """Aggregate of the runs' final ``eval/return_mean``."""
        scores = [row.final_return for row in self.runs if row.final_return is not None]
        return estimate(scores) if scores else None

    def best(self) -> Estimate | None:
        """Aggregate of the runs' best ``eval/return_mean``."""
        scores = [row.best_return for row in self.runs if row.best_return is not None]
        return estimate(scores) if scores else None

    def band(self, axis: str) -> Band | None:
        """The group's ``eval/return_mean`` against ``axis``, aggregated over its seeds."""
        return aggregate_curves([row.curve(axis) for row in self.runs])

    def values(self) -> dict[str, Any]:
        """The group's line, keyed by :data:`GROUP_COLUMNS`."""
        final, best = self.final(), self.best()
        steps = [r.env_steps for r in self.scored if r.env_steps is not None]
        return {
            "group": self.label,
            "seeds": len(self.scored),
            "final_mean": final and final.mean,
            "final_ci_low": final and final.low,
            "final_ci_high": final and final.high,
            "final_iqm": final and final.iqm,
            "best_mean": best and best.mean,
            "best_ci_low": best and best.low,
            "best_ci_high": best and best.high,
            "best_iqm": best and best.iqm,
            "env_steps_mean": float(np.mean(steps)) if steps else None,
            "failed": sum(r.status == "failed" for r in self.runs),
            "jobs": " ".join(r.job for r in self.runs),
        }


def group_runs(rows: list[RunRow]) -> tuple[list[Group], list[str]]:
    """Runs grouped by their overrides minus ``seed`` (in order of appearance), and the
    overrides every group shares (each group's label is what is left)."""
    groups: dict[tuple[str, ...], Group] = {}
    for row in rows:
        key = tuple(o for o in row.overrides if _key(o) != "seed")
        groups.setdefault(key, Group(key, [])).runs.append(row)
    common = shared(g.overrides for g in groups.values())
    for group in groups.values():
        group.label = " ".join(o for o in group.overrides if o not in common) or "all runs"
    return list(groups.values()), common
