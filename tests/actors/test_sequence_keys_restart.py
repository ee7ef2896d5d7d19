"""Sequence keys end to end: an actor process killed and restarted by the supervisor cuts its
sequences under new streams (its next incarnation's env seed), so a ring of steps fed by both
incarnations shares steps within each and never between them: every row reads back as sent."""

from __future__ import annotations

import time

import numpy as np
import psutil
import pytest

from border_py.actors.local import LocalActors, LocalActorSettings
from border_py.config import build
from border_py.overrides import to_plain
from border_py.replay.sequence_replay import SequenceReplayBuffer
from border_py.runs.settings import RunSettings
from border_py.seeding import derive_seed
from border_py.sequences import STORED_SEQUENCE, Sequences
from border_py.trainers.components import build_components
from border_py.transport.batch import ReceivedBatch

from ..conftest import TINY, make_config

N_ENVS = 2


def _take(actors: LocalActors, received: list[Sequences], batches: int) -> None:
    """Poll until ``batches`` more batches of sequences came (copied: they are slot views)."""

    def deliver(batch: ReceivedBatch) -> None:
        if isinstance(batch.transitions, Sequences):
            part = batch.transitions
            copied = Sequences(
                **{k: v.copy() for k, v in part.arrays().items()}, burn_in=part.burn_in
            )
            copied.key = None if part.key is None else part.key.copy()
            received.append(copied)

    want, deadline = len(received) + batches, time.monotonic() + 60
    while len(received) < want and time.monotonic() < deadline:
        actors.poll(0.2, deliver)
    assert len(received) >= want, "the actor sent too few batches"


@pytest.mark.slow
def test_a_restarted_actors_sequences_share_no_step_with_its_killed_incarnation(tmp_path):
    config = to_plain(
        make_config(
            tmp_path,
            *TINY,
            "agent=r2d2",
            "agent.length=4",
            "agent.burn_in=2",
            "agent.n_step=2",
            "agent.period=2",
            "agent.core_size=8",
            "replay_buffer=sequence",
            "actor_manager.n_actors=1",
            f"actor_manager.n_envs_per_actor={N_ENVS}",
            "actor_manager.n_buffer=4",
            "actor_manager.max_restarts=1",
        )
    )
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    settings = build("actor_manager", config["actor_manager"])
    assert isinstance(settings, LocalActorSettings)
    actors = settings.runtime()
    first: list[Sequences] = []
    second: list[Sequences] = []
    actors.start(parts.launch(config, run))
    try:
        _take(actors, first, 4)
        incarnation = actors._running[0]
        assert incarnation is not None
        incarnation.process.kill()  # mid-episode, windows open
        incarnation.process.join(10)
        actors.check()  # the supervisor restarts the slot (what the dead one left is dropped)
        assert actors.restarts() == 1
        _take(actors, second, 4)
    finally:
        actors.stop()
    assert not [p for p in psutil.Process().children() if "border-actor" in p.name()]
    old, new = Sequences.concat(first), Sequences.concat(second)
    assert old.key is not None and new.key is not None
    for key, n in ((old.key, 0), (new.key, 1)):  # streams: the incarnation's env seed and env
        seed = derive_seed(run.seed, "actor", 0, n, "env")
        assert set(key[:, 0].tolist()) <= {seed * N_ENVS + e for e in range(N_ENVS)}
    assert new.key[:, 1].min() == 0  # the new incarnation counts its episodes from 0 again
    # a ring of steps fed by both: each incarnation's overlapping windows share their steps,
    # nothing is shared between them, and every row reads back as it was sent
    both = Sequences.concat([*first, *second])
    assert both.key is not None
    distinct = {
        (stream, episode, start - both.burn_in + t)
        for (stream, episode, start), present in zip(both.key, both.present, strict=True)
        for t in np.flatnonzero(present)
    }
    buffer = SequenceReplayBuffer(capacity=len(both), seed=0, steps_per_sequence=both.steps)
    for part in (*first, *second):
        buffer.push(part)
    assert buffer.store.written == len(distinct) < int(both.present.sum())
    stored = buffer.store.gather(np.arange(len(both)))
    for name in STORED_SEQUENCE:
        np.testing.assert_array_equal(getattr(stored, name), getattr(both, name), err_msg=name)
