"""A resumed run's best return always names the weights in ``best/``.

The usual crash: ``best/`` at opt 800, the periodic checkpoint at 1000, ``best/`` again at 1500,
then the crash and ``resume=auto`` from 1000, which sets the newer ``best/`` aside. The run then
has no best weights of its own timeline; its best return must not stay the checkpoint's, which no
evaluation of the new timeline may beat (no ``best/``, no ``best_eval``, exports of the newest
checkpoint instead).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from border_py import train
from border_py._version import __version__
from border_py.config import build
from border_py.evaluation.evaluator import EvalResult
from border_py.evaluation.service import EvalOutcome
from border_py.layout import ABANDONED, BEST, CHECKPOINTS, META
from border_py.overrides import to_plain
from border_py.runs.checkpoint import load_checkpoint, save_checkpoint
from border_py.runs.session import RunSession
from border_py.runs.settings import RunSettings
from border_py.runs.state import BOOK, TrainerState
from border_py.runs.timeline import step_name
from border_py.trainers.final import best_snapshot
from border_py.trainers.run_book import RunBook
from border_py.trainers.settings import RunState

from ..conftest import TINY, make_config


def _state(opt_steps: int, best_return: float) -> TrainerState:
    return TrainerState(opt_steps, 10 * opt_steps, 0, {}, {}, {}, {}, best_return=best_return)


def _outcome(opt_steps: int, value: float) -> EvalOutcome:
    result = EvalResult(value, 0.0, value, value, 10.0, [value])
    policy = {"w": torch.full((2,), float(opt_steps))}
    snapshot = _state(opt_steps, 0.0)  # the learner's, when the evaluation was asked for
    return EvalOutcome(opt_steps, 10 * opt_steps, result, policy, lambda: ({}, snapshot))


class Run:
    """The bookkeeping of one session of a run (the real :class:`RunBook`; a resumed one's after
    the session's repair of the run's checkpoints, and its part of the state restored)."""

    def __init__(self, tmp_path: Path) -> None:
        self.config = to_plain(make_config(tmp_path, *TINY, "progress=false"))
        self.run_dir = Path(self.config["run_dir"])
        self.checkpoints = self.run_dir / CHECKPOINTS

    def book(self, resume: int | None = None) -> RunBook:
        settings = build("trainer", self.config["trainer"])
        run = RunSettings.of(self.config)
        book = RunBook(self.run_dir, self.config, run, settings, ("obs", "act"), 100, None)
        counters = RunState()
        if resume is not None:
            path = self.checkpoints / step_name(resume)
            resumed = self.config | {"resume": str(path)}
            with RunSession(resumed, RunSettings.of(resumed), [], None) as session:
                session.repair()
            saved = load_checkpoint(path).state
            counters.restore(saved.to_dict())
            book.restore({name: getattr(saved, name) for name in BOOK})
        book.open(counters)
        return book

    def periodic(self, opt_steps: int, best_return: float) -> None:
        """A periodic checkpoint, written as :meth:`RunBook.save` writes one."""
        save_checkpoint(
            self.checkpoints,
            step_name(opt_steps),
            policy={"w": torch.zeros(2)},
            agent_state={},
            state=_state(opt_steps, best_return),
            config=self.config,
            meta={
                "opt_steps": opt_steps,
                "env_steps": 10 * opt_steps,
                "best_return": best_return,
                "border_py": __version__,
            },
        )

    def best(self) -> dict[str, Any]:
        return json.loads((self.checkpoints / BEST / META).read_text())


def test_a_resume_that_sets_best_aside_starts_the_best_return_afresh(tmp_path, caplog):
    run = Run(tmp_path)
    first = run.book()
    first.on_eval(_outcome(800, 10.0))
    run.periodic(1000, first.best_return)
    first.on_eval(_outcome(1500, 20.0))
    first.close("failed")  # the crash
    with caplog.at_level(logging.WARNING):
        resumed = run.book(resume=1000)
    assert (run.checkpoints / ABANDONED / BEST).is_dir()  # the newer best/, set aside
    assert resumed.best_return == -math.inf
    assert "the best return starts afresh, not at the checkpoint's 10" in caplog.text
    resumed.on_eval(_outcome(1100, 5.0))  # below the vanished 10: still the timeline's best
    resumed.close("completed")
    assert run.best()["opt_steps"] == 1100 and run.best()["best_return"] == 5.0
    weights = best_snapshot(run.checkpoints / BEST)
    assert weights is not None and weights.opt_steps == 1100  # what best_eval re-evaluates
    assert resumed.returns()["best_return"] == 5.0


def test_a_best_saved_after_its_checkpoint_by_a_late_evaluation_stays_the_best(tmp_path, caplog):
    """The async trainer asks for an evaluation at opt 1000, then writes the checkpoint of 1000:
    the result comes later, and its best/ (of the weights of 1000) is no newer than the resume."""
    run = Run(tmp_path)
    first = run.book()
    first.on_eval(_outcome(500, 10.0))
    run.periodic(1000, first.best_return)
    first.on_eval(_outcome(1000, 30.0))
    first.close("failed")
    with caplog.at_level(logging.WARNING):
        resumed = run.book(resume=1000)
    assert resumed.best_return == 30.0
    assert "the best return is best/'s 30, not the checkpoint's 10" in caplog.text
    resumed.on_eval(_outcome(1200, 20.0))  # not a new best: best/ keeps the weights of 30
    resumed.close("completed")
    assert run.best()["opt_steps"] == 1000 and run.best()["best_return"] == 30.0


SERIAL = [
    "trainer=serial",
    "experiment=none",
    "agent.hidden_sizes=[16]",
    "trainer.warmup_period=200",
    "trainer.eval_interval=100",
    "trainer.eval_episodes=2",
    "trainer.save_interval=100",
    "trainer.keep_checkpoints=5",
    "trainer.final_eval_episodes=2",
    "progress=false",
]


@pytest.mark.slow
def test_resume_auto_after_a_crash_writes_best_and_best_eval(tmp_path):
    """A real run, then the state a crash after a newer best leaves: the periodic checkpoint of
    100 (whose best, 500, CartPole's most, no later evaluation can beat), a best/ of 300. The
    resumed run (``resume=auto``, as a requeued job) writes its own best/ and re-evaluates it."""
    config = make_config(tmp_path, *SERIAL, "trainer.max_opts=300")
    run = Path(config.run_dir)
    assert train(config)["opt_steps"] == 300
    checkpoints = run / CHECKPOINTS
    shutil.rmtree(checkpoints / BEST)
    shutil.copytree(checkpoints / "000000300", checkpoints / BEST)  # a best newer than 100
    for name in ("000000200", "000000300"):  # the crash came before these were written
        shutil.rmtree(checkpoints / name)
    trainer_pt = checkpoints / "000000100" / "trainer.pt"
    state = torch.load(trainer_pt, weights_only=True)
    torch.save(state | {"best_return": 500.0}, trainer_pt)
    result = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps(result | {"status": "interrupted"}))

    summary = train(make_config(tmp_path, "resume=auto"), overrides=["trainer.max_opts=300"])

    assert summary["opt_steps"] == 300
    assert (checkpoints / ABANDONED / BEST).is_dir()
    meta = json.loads((checkpoints / BEST / META).read_text())
    assert 100 < meta["opt_steps"] <= 300  # an evaluation of the resumed timeline
    assert meta["best_return"] == summary["best_return"]
    assert summary["best_eval"]["opt_steps"] == meta["opt_steps"]
    saved = json.loads((run / "result.json").read_text())
    assert saved["status"] == "completed" and saved["summary"]["best_eval"] == summary["best_eval"]
    assert (
        "the best return starts afresh, not at the checkpoint's 500"
        in (run / "train.log").read_text()
    )
