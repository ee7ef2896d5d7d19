"""Aggregates over the seeds of one configuration on one task, as ``border report`` shows them.

Runs of the same env id whose overrides differ only in ``seed`` form a :class:`Group`. For a set
of scores (one per seed): the mean with its 95% interval and the interquartile mean (IQM) with
its own, each named by its method (:mod:`border_py.reports.intervals`). Curves are aggregated
point by point on a common x grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from border_py.reports.collect import RunRow, as_float, override_key, shared
from border_py.reports.intervals import iqm_interval, mean_interval, trimmed_iqm

__all__ = [
    "GROUP_COLUMNS",
    "Estimate",
    "Group",
    "aggregate_curves",
    "estimate",
    "group_runs",
    "swept_keys",
]

GROUP_COLUMNS = (
    "group",
    "env_id",
    "agent_class",
    "seeds",
    "final_eval_mean",
    "final_eval_ci_low",
    "final_eval_ci_high",
    "final_eval_interval",
    "final_eval_iqm",
    "final_eval_iqm_ci_low",
    "final_eval_iqm_ci_high",
    "final_eval_iqm_interval",
    "final_mean",
    "final_ci_low",
    "final_ci_high",
    "final_interval",
    "final_iqm",
    "final_iqm_ci_low",
    "final_iqm_ci_high",
    "final_iqm_interval",
    "best_mean",
    "best_ci_low",
    "best_ci_high",
    "best_interval",
    "best_iqm",
    "best_iqm_ci_low",
    "best_iqm_ci_high",
    "best_iqm_interval",
    "env_steps_mean",
    "failed",
    "jobs",
)


def _bound(value: Any) -> float | None:
    return None if math.isnan(float(value)) else float(value)


@dataclass(frozen=True)
class Estimate:
    """Aggregate of one score over ``n`` seeds: the mean and its interval (``low``/``high``, None
    for one seed) by ``method``, the IQM and its interval by ``iqm_method``."""

    mean: float
    low: float | None
    high: float | None
    method: str
    iqm: float
    iqm_low: float | None
    iqm_high: float | None
    iqm_method: str
    n: int

    def values(self, prefix: str) -> dict[str, Any]:
        """This estimate's CSV columns, named ``<prefix>_mean``, ``<prefix>_ci_low``, ..."""
        return {
            f"{prefix}_mean": self.mean,
            f"{prefix}_ci_low": self.low,
            f"{prefix}_ci_high": self.high,
            f"{prefix}_interval": self.method,
            f"{prefix}_iqm": self.iqm,
            f"{prefix}_iqm_ci_low": self.iqm_low,
            f"{prefix}_iqm_ci_high": self.iqm_high,
            f"{prefix}_iqm_interval": self.iqm_method,
        }


def estimate(scores: list[float]) -> Estimate:
    """Mean and IQM of one score per seed, each with its 95% interval."""
    values = np.asarray(scores, dtype=float)[:, None]
    mean, centre = mean_interval(values), iqm_interval(values)
    return Estimate(
        float(values.mean()),
        _bound(mean.low[0]),
        _bound(mean.high[0]),
        mean.method,
        float(trimmed_iqm(values)[0]),
        _bound(centre.low[0]),
        _bound(centre.high[0]),
        centre.method,
        len(scores),
    )


@dataclass(frozen=True)
class Band:
    """A curve aggregated over seeds: at each ``x``, the mean, its interval (NaN for one seed,
    by ``method``) and the IQM."""

    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    method: str
    iqm: np.ndarray
    n: int


def common_grid(curves: list[list[tuple[float, float]]]) -> tuple[np.ndarray, np.ndarray] | None:
    """(grid, values of shape (curves, points)): every x of any curve from the first x where
    every curve has one, each curve linearly interpolated onto it (a curve that ended earlier
    keeps its last value: the policy its run ended with). None without curves."""
    curves = [sorted(c) for c in curves if c]
    if not curves:
        return None
    start = max(c[0][0] for c in curves)
    grid = np.array(sorted({x for c in curves for x, _ in c if x >= start}), dtype=float)
    values = np.stack([np.interp(grid, [x for x, _ in c], [y for _, y in c]) for c in curves])
    return grid, values


def aggregate_curves(curves: list[list[tuple[float, float]]]) -> Band | None:
    """Aggregate (x, y) curves, one per seed, on :func:`common_grid`. None without curves."""
    found = common_grid(curves)
    if found is None:
        return None
    grid, values = found
    interval = mean_interval(values)
    return Band(
        grid,
        values.mean(axis=0),
        interval.low,
        interval.high,
        interval.method,
        trimmed_iqm(values),
        values.shape[0],
    )


@dataclass
class Group:
    """Runs of one env id whose overrides differ only in ``seed``.

    Attributes:
        overrides: the overrides of its runs, ``seed`` left out.
        runs: every run of the group.
        label: what sets it apart from the other groups (filled by :func:`group_runs`).
        swept: the value of each swept key (a key whose value differs between groups) in this
            group, ``""`` where its runs do not set it (filled by :func:`group_runs`).
    """

    overrides: tuple[str, ...]
    runs: list[RunRow]
    label: str = ""
    swept: dict[str, str] = field(default_factory=dict)

    @property
    def env_id(self) -> str:
        """The task its runs trained on."""
        return self.runs[0].env_id

    @property
    def scored(self) -> list[RunRow]:
        """The runs with at least one evaluation (the seeds the aggregates are over)."""
        return [row for row in self.runs if row.final_return is not None]

    @property
    def return_range(self) -> tuple[float, float] | None:
        """The returns every run of the group can reach (:mod:`border_py.reports.bounds`); None
        when one run's are not known."""
        ranges = [row.return_range for row in self.runs]
        if not ranges or any(r is None for r in ranges):
            return None
        return min(r[0] for r in ranges if r), max(r[1] for r in ranges if r)

    def final(self) -> Estimate | None:
        """Aggregate of the runs' final ``eval/return_mean``."""
        scores = [row.final_return for row in self.runs if row.final_return is not None]
        return estimate(scores) if scores else None

    def final_eval(self) -> Estimate | None:
        """Aggregate of the runs' final evaluations on fresh episodes (``result.json``'s
        ``final_eval``; runs without one are left out)."""
        scores = [row.final_eval.mean for row in self.runs if row.final_eval is not None]
        return estimate(scores) if scores else None

    def best(self) -> Estimate | None:
        """Aggregate of the runs' best ``eval/return_mean``."""
        scores = [row.best_return for row in self.runs if row.best_return is not None]
        return estimate(scores) if scores else None

    def band(self, axis: str) -> Band | None:
        """The group's ``eval/return_mean`` against ``axis``, aggregated over its seeds."""
        return aggregate_curves([row.curve(axis) for row in self.runs])

    def values(self) -> dict[str, Any]:
        """The group's CSV line: :data:`GROUP_COLUMNS` and one column per swept key."""
        final, best = self.final(), self.best()
        steps = [as_float(r.env_steps) for r in self.scored if r.env_steps is not None]
        line: dict[str, Any] = {"group": self.label, **self.swept}
        line |= {
            "env_id": self.env_id,
            "agent_class": self.runs[0].agent,
            "seeds": len(self.scored),
        }
        for prefix, found in (("final_eval", self.final_eval()), ("final", final), ("best", best)):
            line |= found.values(prefix) if found else {}
        return line | {
            "env_steps_mean": float(np.mean(steps)) if steps else None,
            "failed": sum(r.status == "failed" for r in self.runs),
            "jobs": " ".join(r.job for r in self.runs),
        }


def swept_keys(overrides: list[tuple[str, ...]] | list[list[str]]) -> list[str]:
    """The keys whose value differs between the lists of overrides (absent counts as a value),
    in order of first appearance."""
    keys: list[str] = []
    for listed in overrides:
        keys += [k for k in (override_key(o) for o in listed) if k not in keys]
    values = [{override_key(o): o.split("=", 1)[-1] for o in listed} for listed in overrides]
    return [k for k in keys if len({v.get(k) for v in values}) > 1]


def group_runs(rows: list[RunRow]) -> tuple[list[Group], list[str]]:
    """Runs grouped by env id and overrides minus ``seed`` (in order of appearance), and the
    overrides every group shares (each group's label is what is left)."""
    groups: dict[tuple[str, ...], Group] = {}
    for row in rows:
        key = tuple(o for o in row.overrides if override_key(o) != "seed")
        groups.setdefault((row.env_id, *key), Group(key, [])).runs.append(row)
    common = shared(g.overrides for g in groups.values())
    keys = swept_keys([g.overrides for g in groups.values()])
    for group in groups.values():
        group.label = " ".join(o for o in group.overrides if o not in common) or "all runs"
        if len({g.env_id for g in groups.values()}) > 1 and group.label == "all runs":
            group.label = group.env_id
        given = {override_key(o): o.split("=", 1)[-1] for o in group.overrides}
        group.swept = {k: given.get(k, "") for k in keys}
    return list(groups.values()), common
