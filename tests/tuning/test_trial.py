"""A trial's outcome: only the study's pruner prunes it; a run that the config's own callback
stopped early (early stopping of the user's) is a completed trial with the run's objective."""

from __future__ import annotations

from typing import Any

import pytest

from border_py.tuning.trial import TrialTask, _objective

optuna = pytest.importorskip("optuna", reason="the [tune] extra is not installed")


class Pruner:
    """The trial as ``_objective`` sees it: reports taken, pruning when ``prune`` says so."""

    def __init__(self, prune: bool) -> None:
        self.prune = prune
        self.reported: list[tuple[float, int]] = []

    def report(self, value: float, step: int) -> None:
        self.reported.append((value, step))

    def should_prune(self) -> bool:
        return self.prune


def _task(tmp_path) -> TrialTask:
    return TrialTask(
        trial_id=0,
        number=0,
        run_dir=str(tmp_path / "trial"),
        storage="",
        study_name="study",
        sampler=None,
        pruner=None,
        overrides=["debug=tiny"],
        params={},
        entries=[],
    )


def _trained_until_stopped(monkeypatch) -> None:
    """``train`` as a run that its callbacks stopped at the first evaluation: the trial's own
    ``on_eval`` (the pruner's) hears it, and the config's callback asked to stop."""

    def train(cfg: Any, overrides: list[str], on_eval: Any) -> dict[str, Any]:
        on_eval(150, 600, 9.0)
        return {
            "interrupted": False,
            "stopped_by_callback": True,
            "objective": 9.0,
            "opt_steps": 150,
        }

    monkeypatch.setattr("border_py.trainers.train.train", train)


def test_a_run_stopped_by_the_configs_own_callback_is_a_completed_trial(tmp_path, monkeypatch):
    _trained_until_stopped(monkeypatch)
    trial = Pruner(prune=False)
    assert _objective(trial, _task(tmp_path)) == 9.0
    assert trial.reported == [(9.0, 150)]


def test_a_run_the_pruner_stopped_is_a_pruned_trial(tmp_path, monkeypatch):
    _trained_until_stopped(monkeypatch)
    with pytest.raises(optuna.TrialPruned, match="pruned at opt step 150"):
        _objective(Pruner(prune=True), _task(tmp_path))
