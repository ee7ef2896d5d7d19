"""Callbacks (``border_py.callbacks``): one given in the config hears the run start, each record,
each evaluation, each save and the end, in order and with what the run recorded, in both trainers;
one stops the run from ``on_eval``; one that raises ends the run in one line; a saved run's
callbacks are code, imported on resume only when trusted."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from border_py import train
from border_py.callbacks import Callback, CallbackError
from border_py.errors import ConfigError
from border_py.layout import BEST, META
from border_py.runs.timeline import step_name
from border_py.runs.trust import Trust
from border_py.trainers.train import prepare

from ..conftest import REPO, TINY, make_config, run_border, scalar_tags

PROBE = f"{__name__}.Probe"


class Probe(Callback):
    """Notes what it hears (a save with the checkpoint's ``meta.json`` as it is then); stops the
    run at its ``stop_at``-th evaluation, raises ``ValueError`` at its ``raise_in`` hook."""

    built: list[Probe] = []  # every probe the runs built, in order

    def __init__(self, stop_at: int | None = None, raise_in: str | None = None) -> None:
        self.stop_at, self.raise_in = stop_at, raise_in
        self.heard: list[tuple[Any, ...]] = []
        Probe.built.append(self)

    def _hear(self, hook: str, *args: Any) -> None:
        self.heard.append((hook, *args))
        if hook == self.raise_in:
            raise ValueError(f"{hook} failed\nsecond line")

    def on_start(
        self, run_dir: Path, config: dict[str, Any], opt_steps: int, env_steps: int
    ) -> None:
        self._hear("start", run_dir, config["callbacks"], opt_steps, env_steps)

    def on_record(self, step: int, scalars: dict[str, float]) -> None:
        self._hear("record", step, scalars)

    def on_eval(self, opt_steps: int, env_steps: int, return_mean: float) -> bool:
        self._hear("eval", opt_steps, env_steps, return_mean)
        evaluations = sum(1 for event in self.heard if event[0] == "eval")
        return self.stop_at is not None and evaluations >= self.stop_at

    def on_save(self, checkpoint: Path, opt_steps: int, env_steps: int) -> None:
        meta = json.loads((checkpoint / META).read_text())
        self._hear("save", checkpoint, opt_steps, env_steps, meta)

    def on_stop(self, summary: dict[str, Any]) -> None:
        self._hear("stop", summary)


def _probe(**keys: Any) -> str:
    """The override giving the run one :class:`Probe` with ``keys``."""
    items = ",".join([f"_target_:{PROBE}", *(f"{k}:{v}" for k, v in keys.items())])
    return f"callbacks=[{{{items}}}]"


def _run(tmp_path: Path, *overrides: str) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    Probe.built.clear()
    summary = train(make_config(tmp_path, *TINY, "progress=false", *overrides))
    assert len(Probe.built) == 1  # built once, from the config
    return summary, Probe.built[0].heard


TRAINERS = {
    "serial": ["trainer=serial"],
    "async": ["trainer=async", "actor_manager.n_actors=1", "trainer.sync_interval=10"],
}


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(TRAINERS))
def test_a_callback_in_the_config_hears_the_run_in_order_with_what_it_recorded(tmp_path, trainer):
    summary, heard = _run(tmp_path, *TRAINERS[trainer], "trainer.save_interval=100", _probe())
    run_dir = tmp_path / "run"
    kinds = [event[0] for event in heard]
    assert kinds[0] == "start" and kinds[-1] == "stop" and "start" not in kinds[1:-1]
    assert heard[0][1:] == (run_dir, [{"_target_": PROBE}], 0, 0)
    assert heard[-1][1] == summary  # the summary train returned, objective and all
    tags = scalar_tags(run_dir)

    # each record is what TensorBoard holds at its step
    records = [event for event in heard if event[0] == "record"]
    for _, step, scalars in records:
        assert all(
            math.isclose(value, dict(tags[tag])[step], rel_tol=1e-6)
            for tag, value in scalars.items()
        )
    trained = [step for _, step, scalars in records if "train/loss" in scalars]
    assert trained == [step for step, _ in tags["train/loss"]] == [50, 100, 150, 200, 250, 300]

    # each evaluation comes right after its record (and best's save, when it is a new best)
    evaluations = [(i, event) for i, event in enumerate(heard) if event[0] == "eval"]
    assert [e[1] for _, e in evaluations] == [step for step, _ in tags["eval/return_mean"]]
    returns = [e[3] for _, e in evaluations]
    assert returns == pytest.approx([value for _, value in tags["eval/return_mean"]])
    assert summary["best_return"] == max(returns) and summary["final_return"] == returns[-1]
    for i, (_, opt_steps, env_steps, return_mean) in evaluations:
        before = heard[i - 1]
        if before[0] == "save":  # a new best
            assert before[1] == run_dir / "checkpoints" / BEST and before[2] == opt_steps
            assert before[4]["best_return"] == return_mean
            before = heard[i - 2]
        assert before[0] == "record" and before[1] == opt_steps
        assert before[2]["eval/return_mean"] == pytest.approx(return_mean)
        assert before[2]["eval/env_steps"] == env_steps

    # each save is a complete checkpoint of the steps it names
    saves = [event for event in heard if event[0] == "save"]
    periodic = [event for event in saves if event[1].name != BEST]
    assert [event[1].name for event in periodic] == [step_name(n) for n in (100, 200, 300)]
    for _, _, opt_steps, env_steps, meta in saves:
        assert (meta["opt_steps"], meta["env_steps"]) == (opt_steps, env_steps)
    assert periodic[-1][2] == summary["opt_steps"]  # the last: the run's final weights
    assert sum(1 for event in saves if event[1].name == BEST) >= 1


@pytest.mark.slow
def test_a_callback_stops_the_run_from_on_eval_with_a_final_checkpoint(tmp_path):
    summary, heard = _run(tmp_path, "trainer=serial", _probe(stop_at=1))
    assert summary["stopped_by_callback"] and not summary["interrupted"]
    assert summary["opt_steps"] == 150 < 300  # the first evaluation, at 150 of 300
    kinds = [event[0] for event in heard]
    assert kinds.count("eval") == 1 and kinds[-1] == "stop"
    final = [event for event in heard if event[0] == "save"][-1]  # after the evaluation
    assert final[1].name == step_name(150) and kinds.index("eval") < heard.index(final)
    assert "final_eval" not in summary  # a stopped run plays no final evaluation


def test_a_callback_that_raises_ends_the_run_in_one_line_recorded_as_failed(tmp_path):
    Probe.built.clear()
    config = make_config(tmp_path, *TINY, "trainer=serial", "progress=false")
    with pytest.raises(CallbackError) as raised:
        train(config, callbacks=[Probe(raise_in="start")])
    assert str(raised.value) == ("callbacks[0] (Probe).on_start raised ValueError: start failed")
    assert isinstance(raised.value.__cause__, ValueError)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "failed" and result["error"]["type"] == "CallbackError"
    assert "ValueError: start failed" in result["error"]["traceback"]  # the callback's own


@pytest.mark.slow
def test_border_train_ends_in_one_line_when_a_callback_raises(tmp_path):
    run = run_border(
        [
            "train",
            *TINY,
            "trainer=serial",
            "progress=false",
            f"run_dir={tmp_path / 'run'}",
            _probe(raise_in="record"),
        ],
        tmp_path,
        env={"PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])},
    )
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last == "border: error: callbacks[0] (Probe).on_record raised ValueError: record failed"
    assert "Traceback" not in run.stderr


def test_callbacks_that_are_not_callbacks_are_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^callbacks=5: must be a list of components"):
        prepare(make_config(tmp_path, *TINY, "callbacks=5"))
    with pytest.raises(ConfigError, match=r"^callbacks\[0\]\._target_=collections.Counter: not a"):
        prepare(make_config(tmp_path, *TINY, "callbacks=[{_target_:collections.Counter}]"))
    with pytest.raises(ConfigError, match=r"^callbacks\[0\]\.nope is not a parameter of"):
        prepare(make_config(tmp_path, *TINY, _probe(nope=1)))
    with pytest.raises(ConfigError, match=r"^callbacks\[0\]: int is not a callback"):
        train(make_config(tmp_path, *TINY), callbacks=[3])  # type: ignore[list-item]
    assert not (tmp_path / "run").exists()  # refused before the run dir is claimed


def test_a_saved_runs_callbacks_are_imported_only_when_trusted(tmp_path):
    saved = {"callbacks": [{"_target_": "my_pkg.hooks.Upload", "url": "http://127.0.0.1:1"}]}
    with pytest.raises(ConfigError, match=r"^callbacks\[0\]\._target_=my_pkg\.hooks\.Upload in"):
        Trust().check_imports(saved, tmp_path / "config.json")
    Trust(entries=("my_pkg",)).check_imports(saved, tmp_path / "config.json")
    Trust(named=frozenset({"my_pkg.hooks.Upload"})).check_imports(saved, tmp_path / "config.json")
