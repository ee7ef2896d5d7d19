"""Aggregates across tasks, as rliable computes them (Agarwal et al. 2021), with numpy and SciPy.

When the report's runs trained on several env ids, a *configuration* is what is left of a group's
overrides once the task's own keys are taken out: a key whose values and the env ids match one to
one (``env.id=...``, ``experiment=dqn_cartpole,dqn_acrobot``). A run's score is its final
evaluation on fresh episodes (``final_eval``) when every scored run has one, else for every run
the last selection evaluation (``final_return``): :func:`run_scores` picks, once per report. Each
configuration's scores are normalised per task (:mod:`border_py.reports.references`: random 0,
target 1; an env id not in that table by the range of its runs' scores, labelled so), then
aggregated over runs x tasks: the mean (of the per-task means) and the IQM (of every run's score,
25% cut at each end), each with a 95% stratified-bootstrap interval: runs are resampled with
replacement within each task, :data:`~border_py.reports.intervals.RESAMPLES` times, and the
interval is the 2.5 and 97.5 percentiles of the resampled aggregate (rliable's
``get_interval_estimates``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from border_py.reports.aggregate import Group
from border_py.reports.collect import RunRow, override_key, shared
from border_py.reports.intervals import BOOTSTRAP_SEED, CONFIDENCE, RESAMPLES, trimmed_iqm
from border_py.reports.references import REFERENCES

__all__ = [
    "FINAL_EVAL",
    "FINAL_RETURN",
    "RUN_RANGE",
    "SCORE_TEXT",
    "STRATIFIED_BOOTSTRAP",
    "Configuration",
    "Scores",
    "TaskAggregate",
    "aggregate_tasks",
    "configurations",
    "run_scores",
    "stratified_bootstrap",
    "task_keys",
    "task_scales",
]

STRATIFIED_BOOTSTRAP = "95% stratified bootstrap"
RUN_RANGE = "range of its runs"  # how a task outside the reference table is normalised
FINAL_EVAL = "final_eval"
FINAL_RETURN = "final_return"
SCORE_TEXT = {  # what each score is, as the table across tasks names it
    FINAL_EVAL: "final eval, the final weights on fresh episodes",
    FINAL_RETURN: "final return, the last selection evaluation",
}


@dataclass(frozen=True)
class Scores:
    """The score the report ranks runs by across tasks and exports: ``name`` (:data:`FINAL_EVAL`
    or :data:`FINAL_RETURN`) and its value for each scored run, by run dir."""

    name: str
    values: dict[Path, float]

    def of(self, row: RunRow) -> float:
        """The score of ``row`` (a scored run of the report)."""
        return self.values[row.path]


def run_scores(groups: list[Group]) -> Scores:
    """The scored runs' ``final_eval`` means when every one of them has a ``final_eval``, else
    their ``final_return`` (older runs, ``trainer.final_eval_episodes=0``, interrupted runs): one
    kind of score per report, never a mix."""
    rows = [row for group in groups for row in group.scored]
    fresh = {row.path: row.final_eval.mean for row in rows if row.final_eval is not None}
    if rows and len(fresh) == len(rows):
        return Scores(FINAL_EVAL, fresh)
    finals = {row.path: float(row.final_return) for row in rows if row.final_return is not None}
    return Scores(FINAL_RETURN, finals)


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


def task_scales(groups: list[Group], scores: Scores) -> dict[str, tuple[float, float, str]]:
    """Per env id, the (0, 1) points of its normalised scale and what they are (outside the
    reference table: the range of its runs' ``scores``)."""
    scales = {}
    for env_id in dict.fromkeys(g.env_id for g in groups):
        if env_id in REFERENCES:
            ref = REFERENCES[env_id]
            scales[env_id] = (ref.random, ref.target, "random policy .. reference target")
            continue
        found = [scores.of(r) for g in groups if g.env_id == env_id for r in g.scored]
        low, high = (min(found), max(found)) if found else (0.0, 1.0)
        scales[env_id] = (low, high if high > low else low + 1.0, RUN_RANGE)
    return scales


def normalized_finals(
    config: Configuration, scales: dict[str, tuple[float, float, str]], scores: Scores
) -> list[np.ndarray]:
    """Per task of ``config``, its runs' normalised ``scores``."""
    out = []
    for group in config.groups:
        low, high, _ = scales[group.env_id]
        finals = np.array([scores.of(r) for r in group.scored], dtype=float)
        out.append((finals - low) / (high - low))
    return out


def _mean_of_tasks(per_task: list[np.ndarray]) -> np.ndarray:
    return np.mean([scores.mean(axis=-1) for scores in per_task], axis=0)


def _pooled_iqm(per_task: list[np.ndarray]) -> np.ndarray:
    return trimmed_iqm(np.concatenate(per_task, axis=-1), axis=-1)


@dataclass(frozen=True)
class TaskAggregate:
    """A configuration's normalised score (``score``: :data:`FINAL_EVAL` or :data:`FINAL_RETURN`)
    over its runs x tasks: the mean and the IQM, each with its stratified-bootstrap interval (None
    when no task has two runs)."""

    label: str
    score: str
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
    config: Configuration, scales: dict[str, tuple[float, float, str]], scores: Scores
) -> TaskAggregate | None:
    """The configuration's aggregate of ``scores`` over runs x tasks; None when no task has a
    scored run."""
    per_task = [s for s in normalized_finals(config, scales, scores) if s.size]
    if not per_task:
        return None
    tasks = [g.env_id for g in config.groups if g.scored]
    point = {"mean": float(_mean_of_tasks(per_task)), "iqm": float(_pooled_iqm(per_task))}
    runs = sum(s.size for s in per_task)
    head = (config.label, scores.name, tasks, runs)
    if runs == len(per_task):  # one run per task: nothing to resample
        return TaskAggregate(*head, point["mean"], None, None, point["iqm"], None, None)
    bands = stratified_bootstrap(per_task)
    return TaskAggregate(*head, point["mean"], *bands["mean"], point["iqm"], *bands["iqm"])
