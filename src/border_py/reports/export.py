"""``border report --export-scores scores.npz``: the report's scores in rliable's layout.

One ``.npz`` (no pickled objects: ``np.load`` reads it with ``allow_pickle=False``) holding:

- ``tasks``: the env ids, in column order; ``groups``: the configurations' labels (what
  :func:`~border_py.reports.tasks.configurations` gathers: overrides minus seed and the task's
  keys), in the order of the arrays below;
- ``score``: which score ``final_<i>`` holds (:func:`~border_py.reports.tasks.run_scores`):
  ``final_eval``, each run's final weights on fresh episodes, when every scored run has one, else
  ``final_return``, each run's last selection evaluation (its last ``eval/return_mean``);
- per configuration ``i``: ``final_<i>``, shape (runs, tasks), the runs' scores;
  ``normalized_<i>``, the same normalised per task (random 0, target 1, see
  :mod:`border_py.reports.references`); ``curves_<i>``, shape (runs, tasks, evaluations),
  each run's ``eval/return_mean`` per evaluation in order, and ``env_steps_<i>``, the env steps
  of each of those evaluations;
- ``scale``: shape (tasks, 2), the returns that normalise to 0 and 1 per task.

Run ``r`` of one task and run ``r`` of another are unrelated (rliable resamples each task's runs
on its own). A task with fewer runs than another, or a run with fewer evaluations, is padded
with NaN, which the report says when it writes the file.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from border_py.files import write_file
from border_py.reports.aggregate import Group
from border_py.reports.tasks import Configuration, Scores, configurations, run_scores, task_scales

__all__ = ["export_scores"]


def _padded(
    config: Configuration, scores: Scores, tasks: list[str], runs: int, evals: int
) -> dict[str, np.ndarray]:
    """``config``'s arrays (see the module's docstring), NaN where it has no value."""
    final = np.full((runs, len(tasks)), np.nan)
    curves = np.full((runs, len(tasks), evals), np.nan)
    steps = np.full((runs, len(tasks), evals), np.nan)
    for group in config.groups:
        column = tasks.index(group.env_id)
        for r, row in enumerate(group.scored):
            final[r, column] = scores.of(row)
            for e, point in enumerate(row.evaluations):
                curves[r, column, e] = point.value
                steps[r, column, e] = np.nan if point.env_steps is None else point.env_steps
    return {"final": final, "curves": curves, "env_steps": steps}


def score_arrays(groups: list[Group]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The arrays :func:`export_scores` writes, and one note per configuration padded with NaN."""
    configs = configurations(groups)
    tasks = list(dict.fromkeys(g.env_id for g in groups))
    scores = run_scores(groups)
    scales = task_scales(groups, scores)
    runs = max(len(g.scored) for g in groups)
    evals = max((len(r.evaluations) for g in groups for r in g.scored), default=0)
    arrays: dict[str, np.ndarray] = {
        "tasks": np.array(tasks, dtype=str),
        "groups": np.array([c.label for c in configs], dtype=str),
        "score": np.array(scores.name, dtype=str),
        "scale": np.array([scales[t][:2] for t in tasks], dtype=float),
    }
    notes = []
    for i, config in enumerate(configs):
        found = _padded(config, scores, tasks, runs, evals)
        low, high = arrays["scale"][:, 0], arrays["scale"][:, 1]
        arrays[f"final_{i}"] = found["final"]
        arrays[f"normalized_{i}"] = (found["final"] - low) / (high - low)
        arrays[f"curves_{i}"] = found["curves"]
        arrays[f"env_steps_{i}"] = found["env_steps"]
        if np.isnan(found["final"]).any():
            notes.append(f"{config.label}: NaN where a task has fewer than {runs} scored runs")
    return arrays, notes


def export_scores(path: Path, groups: list[Group]) -> list[str]:
    """Write the scores of ``groups`` to ``path`` (``.npz``, published by
    :func:`~border_py.files.write_file`); the notes of :func:`score_arrays`."""
    arrays, notes = score_arrays(groups)
    data = io.BytesIO()
    np.savez(data, **arrays)  # type: ignore[arg-type]
    write_file(path, data.getvalue())
    return notes
