"""Aggregates across tasks, as rliable computes them (Agarwal et al. 2021), with numpy and SciPy.

When the report's runs trained on several env ids, a *configuration* is what is left of a group's
overrides once the task's own keys are taken out: a key whose values and the env ids match one to
one (``env.id=...``, ``experiment=dqn_cartpole,dqn_acrobot``). Each configuration's final returns
are normalised per task (:mod:`border_py.reports.references`: random 0, target 1; an env id not in
that table by the range of its runs' final returns, labelled so), then aggregated over runs x tasks:
the mean (of the per-task means) and the IQM (of every run's score, 25% cut at each end), each
with a 95% stratified-bootstrap interval: runs are resampled with replacement within each task,
:data:`~border_py.reports.intervals.RESAMPLES` times, and the interval is the 2.5 and 97.5
percentiles of the resampled aggregate (rliable's ``get_interval_estimates``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from border_py.reports.aggregate import Group
from border_py.reports.collect import override_key, shared
from border_py.reports.intervals import BOOTSTRAP_SEED, CONFIDENCE, RESAMPLES, trimmed_iqm
from border_py.reports.references import REFERENCES

STRATIFIED_BOOTSTRAP = "95% stratified bootstrap"
RUN_RANGE = "range of its runs"  # how a task outside the reference table is normalised


@dataclass
class Configuration:
    """One configuration's groups, one per task (in order of appearance)."""

    label: str
    groups: list[Group]

    @property
    def tasks(self) -> list[str]:
        """The env ids it ran on."""
        return [g.env_id for g in self.groups]


def task_keys(groups: list[Group]) -> set[str]:
    """The override keys that name the task: with several env ids, the keys whose values and the
    groups' env ids match one to one (a key a group does not set counts as a value)."""
    if len({g.env_id for g in groups}) < 2:
        return set()
    keys = {override_key(o) for g in groups for o in g.overrides}
    found = set()
    for key in keys:
        pairs = set()
        for group in groups:
            given = {override_key(o): o for o in group.overrides}
            pairs.add((given.get(key), group.env_id))
        if len({v for v, _ in pairs}) == len(pairs) == len({e for _, e in pairs}):
            found.add(key)
    return found


def configurations(groups: list[Group]) -> list[Configuration]:
    """The groups gathered by configuration: their overrides minus the task's keys."""
    keys = task_keys(groups)
    rest = [tuple(o for o in g.overrides if override_key(o) not in keys) for g in groups]
    common = shared(rest)
    found: dict[tuple[str, ...], Configuration] = {}
    for group, key in zip(groups, rest, strict=True):
        label = " ".join(o for o in key if o not in common) or "all runs"
        found.setdefault(key, Configuration(label, [])).groups.append(group)
    return list(found.values())


def task_scales(groups: list[Group]) -> dict[str, tuple[float, float, str]]:
    """Per env id, the (0, 1) points of its normalised scale and what they are."""
    scales = {}
    for env_id in dict.fromkeys(g.env_id for g in groups):
        if env_id in REFERENCES:
            ref = REFERENCES[env_id]
            scales[env_id] = (ref.random, ref.target, "random policy .. reference target")
            continue
        scores = [
            float(r.final_return)
            for g in groups
            if g.env_id == env_id
            for r in g.scored
            if r.final_return is not None
        ]
        low, high = (min(scores), max(scores)) if scores else (0.0, 1.0)
        scales[env_id] = (low, high if high > low else low + 1.0, RUN_RANGE)
    return scales


def normalized_finals(
    config: Configuration, scales: dict[str, tuple[float, float, str]]
) -> list[np.ndarray]:
    """Per task of ``config``, its runs' normalised final returns."""
    out = []
    for group in config.groups:
        low, high, _ = scales[group.env_id]
        finals = np.array([r.final_return for r in group.scored], dtype=float)
        out.append((finals - low) / (high - low))
    return out


def _mean_of_tasks(per_task: list[np.ndarray]) -> np.ndarray:
    return np.mean([scores.mean(axis=-1) for scores in per_task], axis=0)


def _pooled_iqm(per_task: list[np.ndarray]) -> np.ndarray:
    return trimmed_iqm(np.concatenate(per_task, axis=-1), axis=-1)


@dataclass(frozen=True)
class TaskAggregate:
    """A configuration's normalised final return over its runs x tasks: the mean and the IQM,
    each with its stratified-bootstrap interval (None when no task has two runs)."""

    label: str
    tasks: list[str]
    runs: int
    mean: float
    mean_low: float | None
    mean_high: float | None
    iqm: float
    iqm_low: float | None
    iqm_high: float | None
    method: str = STRATIFIED_BOOTSTRAP


def stratified_bootstrap(per_task: list[np.ndarray]) -> dict[str, tuple[float, float]]:
    """95% percentile intervals of the mean and the IQM over ``per_task`` scores, runs resampled
    with replacement within each task (seeded: the same scores, the same intervals)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    resampled = [s[rng.integers(0, s.size, size=(RESAMPLES, s.size))] for s in per_task]
    tails = [100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2]
    out = {}
    for name, statistic in (("mean", _mean_of_tasks), ("iqm", _pooled_iqm)):
        low, high = np.percentile(statistic(resampled), tails)
        out[name] = (float(low), float(high))
    return out


def aggregate_tasks(
    config: Configuration, scales: dict[str, tuple[float, float, str]]
) -> TaskAggregate | None:
    """The configuration's aggregate over runs x tasks; None when no task has a scored run."""
    per_task = [s for s in normalized_finals(config, scales) if s.size]
    if not per_task:
        return None
    tasks = [g.env_id for g in config.groups if g.scored]
    point = {"mean": float(_mean_of_tasks(per_task)), "iqm": float(_pooled_iqm(per_task))}
    runs = sum(s.size for s in per_task)
    if runs == len(per_task):  # one run per task: nothing to resample
        return TaskAggregate(
            config.label, tasks, runs, point["mean"], None, None, point["iqm"], None, None
        )
    bands = stratified_bootstrap(per_task)
    return TaskAggregate(
        config.label,
        tasks,
        runs,
        point["mean"],
        *bands["mean"],
        point["iqm"],
        *bands["iqm"],
    )
