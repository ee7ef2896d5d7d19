"""What a resume restores, in one place (``runs/state.py``): each owner of the run's state gives
its part (``state``) and takes it back (``restore``); ``TrainerState`` composes the parts into
what ``trainer.pt`` holds and hands each back."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
import torch

from border_py.config import build
from border_py.overrides import to_plain
from border_py.runs.state import Owners, TrainerState
from border_py.seeding import global_rng_state
from border_py.trainers.async_trainer import SampleGate
from border_py.trainers.cadence import Cadence
from border_py.trainers.settings import RunState
from border_py.transitions import Transitions

from ..conftest import TINY, make_config


class Held:
    """An owner that holds its part as given (the actors' and the book's stand-in)."""

    def __init__(self, part: Any) -> None:
        self.part = part

    def state(self) -> Any:
        return self.part

    def restore(self, saved: Any) -> None:
        self.part = saved


def _same(a: Any, b: Any) -> bool:
    """Whether two saved states are equal (their tensors and arrays too)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (torch.Tensor, np.ndarray)):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    return bool(a == b)


def _owners(tmp_path, actors: Any, book: Any) -> Owners:
    config = to_plain(make_config(tmp_path, *TINY, "trainer.save_env_interval=500"))
    settings = build("trainer", config["trainer"])
    counters = RunState()
    buffer = build("replay_buffer", dict(config["replay_buffer"]) | {"seed": 3})
    gate = SampleGate(
        warmup_period=100, batch_size=32, min_samples_per_opt=0.0, max_samples_per_opt=None
    )
    return Owners(counters, Cadence(settings, counters), gate, buffer, Held(actors), Held(book))


def _pushed(buffer: Any, n: int) -> None:
    rng = np.random.default_rng(0)
    buffer.push(
        Transitions(
            obs=rng.normal(size=(n, 4)).astype(np.float32),
            action=rng.integers(0, 2, size=n),
            reward=rng.normal(size=n).astype(np.float32),
            next_obs=rng.normal(size=(n, 4)).astype(np.float32),
            discount=np.full(n, 0.99, dtype=np.float32),
        )
    )


def test_capture_then_restore_gives_every_owner_its_part_back(tmp_path):
    first = _owners(tmp_path, {"actors": [{"received": 7}]}, {"best_return": 9.5})
    first.counters.restore({"opt_steps": 300, "env_steps": 1200, "samples": 1190})
    first.cadence.restore({"eval": 2, "save": 1})
    first.gate.restart(first.counters)
    _pushed(first.replay, 50)
    book = {"best_return": 9.5, "eval_returns": [1.0, 9.5], "seconds": 4.25}
    first.book.restore(book)
    saved = TrainerState.capture(first).to_dict()  # what trainer.pt holds
    assert saved["actors"] == [{"received": 7}] and saved["best_return"] == 9.5
    assert saved["env_intervals"] == {"eval": 2, "save": 1}
    assert _same(saved["rng"], global_rng_state())

    again = _owners(tmp_path / "again", {}, {})
    TrainerState.from_dict(saved).restore(again, first.replay.arrays())
    assert _same(TrainerState.capture(again).to_dict(), saved)
    assert len(again.replay) == 50 and again.gate.state() == first.gate.state()


def test_a_resume_without_the_transitions_counts_the_warmup_again(tmp_path, caplog):
    first = _owners(tmp_path, {}, {"best_return": 1.0, "eval_returns": [1.0], "seconds": 2.0})
    first.counters.restore({"opt_steps": 300, "env_steps": 1200, "samples": 1190})
    _pushed(first.replay, 50)
    state = TrainerState.from_dict(TrainerState.capture(first).to_dict())
    again = _owners(tmp_path / "again", {}, {})
    with caplog.at_level(logging.WARNING):
        state.restore(again, None)
    assert len(again.replay) == 0 and again.counters == RunState(300, 1200, 1190)
    assert again.gate.state() == {"base_samples": 1190, "base_opts": 300}  # from now
    assert "resuming without a replay buffer" in caplog.text
    assert "collecting 100 transitions before optimizing again" in caplog.text  # the gate's


@pytest.mark.parametrize(("env_steps", "stretch"), [(0, 0), (1200, 2)])
def test_a_checkpoint_without_env_intervals_continues_from_its_env_steps_stretch(
    tmp_path, env_steps, stretch
):
    """Checkpoints of versions before env-step intervals: no evaluation repeated, none skipped."""
    owners = _owners(tmp_path, {}, {})
    owners.counters.restore({"opt_steps": 300, "env_steps": env_steps, "samples": 0})
    owners.cadence.restore({})
    assert owners.cadence.state()["save"] == stretch  # save_env_interval=500


def test_the_counters_come_back_first_the_cadence_counts_from_them(tmp_path):
    """``TrainerState.restore`` gives the counters back before the owners that count from them: a
    checkpoint that did not save ``env_intervals`` continues in the stretch of its env steps."""
    first = _owners(tmp_path, {}, {"best_return": 1.0, "eval_returns": [1.0], "seconds": 2.0})
    first.counters.restore({"opt_steps": 300, "env_steps": 1200, "samples": 1190})
    _pushed(first.replay, 50)
    saved = TrainerState.capture(first).to_dict()
    del saved["env_intervals"]  # as versions before env-step intervals wrote it
    again = _owners(tmp_path / "again", {}, {})
    TrainerState.from_dict(saved).restore(again, first.replay.arrays())
    assert again.cadence.state()["save"] == 2  # save_env_interval=500: 1200 is in stretch 2
