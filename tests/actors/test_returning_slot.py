"""An actor slot a resume drops and a later one runs again: it continues its incarnations, so its
env seeds and frame source are new, its transitions sampleable and its stacks whole.

Three sessions of a run with frame storage (2 actors, resumed with 1, resumed with 2), each
through the real pieces: the slots' records (:meth:`ActorSettings.slots`), the actors' samplers
(:func:`build_sampler`), the replay buffer and its snapshot in a real checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from border_py import train
from border_py._version import __version__
from border_py.actors.clock import LocalClock
from border_py.actors.process import build_sampler
from border_py.actors.runtime import accounting_of, slots_state
from border_py.actors.sampler import SampleStats
from border_py.actors.settings import ActorSettings
from border_py.overrides import to_plain
from border_py.replay.uniform import UniformReplayBuffer
from border_py.runs.checkpoint import load_checkpoint, save_checkpoint
from border_py.runs.settings import RunSettings
from border_py.runs.state import TrainerState
from border_py.runs.timeline import step_name
from border_py.shipped import option_keys
from border_py.trainers.components import build_components
from border_py.transport.batch import ReceivedBatch

from ..conftest import make_config
from ..frame_env import STACK
from ..replay.test_prioritized_and_frames import check_pattern_stacks

CAPACITY = 20_000  # nothing is overwritten: the first life's frames stay in the ring
BATCHES, N_BUFFER = 6, 40  # per actor and session


def _config(tmp_path: Path) -> dict[str, Any]:
    return to_plain(
        make_config(
            tmp_path,
            "env=gym",
            "env.id=tests.frame_env:FramePattern-v0",
            "agent.network=mlp",
            "agent.hidden_sizes=[8]",
            f"replay_buffer.frame_stack={STACK}",
            "actor_manager.n_envs_per_actor=2",
        )
    )


class Session:
    """One session of the run: its slots, each run slot's sampler, the rows each slot pushed."""

    def __init__(self, config: dict[str, Any], n_actors: int, resume: Path | None) -> None:
        shared = option_keys("actor_manager", "_actors")  # the keys as shipped
        self.settings = ActorSettings(**shared | {"n_actors": n_actors, "n_envs_per_actor": 2})
        saved = load_checkpoint(resume) if resume is not None else None
        self.records, self.kept, _ = self.settings.slots(
            saved.state.actors if saved is not None else None
        )
        self.buffer = UniformReplayBuffer(CAPACITY, seed=0, frame_stack=STACK)
        if saved is not None:
            arrays = saved.buffer()
            assert arrays is not None
            self.buffer.load(saved.state.replay, arrays)
        clock = LocalClock(0)
        specs = [self.settings.spec(i, r, seed=0) for i, r in enumerate(self.records)]
        self.samplers = [build_sampler(spec, config, clock) for spec in specs]
        self.rows: list[list[int]] = [[] for _ in specs]

    def sample(self) -> None:
        """Each actor sends its batches in turn (their frames interleave in the store)."""
        for _ in range(BATCHES):
            for i, sampler in enumerate(self.samplers):
                stats = SampleStats()
                batch = sampler.sample(N_BUFFER, stats)
                first = len(self.buffer)
                self.buffer.push(batch)
                self.rows[i] += range(first, len(self.buffer))
                self.records[i].count(ReceivedBatch(i, batch, stats.env_steps))

    def save(self, root: Path, opt_steps: int) -> Path:
        """A checkpoint of the session's end with the replay buffer and the slots' records."""
        for sampler in self.samplers:
            sampler.close()
        state = TrainerState(
            opt_steps,
            0,
            len(self.buffer),
            {},
            self.buffer.state(),
            {},
            slots_state(self.records, self.kept),
        )
        return save_checkpoint(
            root,
            step_name(opt_steps),
            policy={},
            agent_state={},
            state=state,
            config={"seed": 0, "env": {}, "agent": {}},
            meta={"replay_buffer": True, "border_py": __version__},
            buffer=self.buffer.arrays(),
        )


def test_a_slot_dropped_then_run_again_continues_its_lives_with_new_seeds_and_frames(tmp_path):
    config = _config(tmp_path)
    root = tmp_path / "checkpoints"
    first = Session(config, n_actors=2, resume=None)
    first.sample()
    first_life = first.samplers[1]
    received = first.records[1].received
    second = Session(config, n_actors=1, resume=first.save(root, 100))
    # slot 1 is not run, but its record is kept: in the totals, and saved again
    assert [r.incarnation for r in second.kept] == [0]
    assert accounting_of(second.records, second.kept)["received_total"] == (
        second.records[0].received + received
    )
    second.sample()
    third = Session(config, n_actors=2, resume=second.save(root, 200))
    assert [r.incarnation for r in third.records] == [2, 1]  # each slot's next life
    assert third.records[1].received == received
    returning = third.samplers[1]
    assert returning.seed != first_life.seed  # its envs' reset seeds
    assert returning.frames is not None and first_life.frames is not None
    assert returning.frames.source != first_life.frames.source
    third.sample()

    rows = np.asarray(third.rows[1])
    live = third.buffer._live(rows)
    assert live.all(), f"{(~live).sum()} of {len(rows)} of the returning slot's rows unsampleable"
    gamma, n_step = config["agent"]["gamma"], config["agent"]["n_step"]
    check_pattern_stacks(third.buffer._gather(rows), n_step, gamma)  # no stack crosses episodes
    every = np.arange(len(third.buffer))
    assert third.buffer._live(every).all()
    check_pattern_stacks(third.buffer._gather(every), n_step, gamma)
    for sampler in third.samplers:
        sampler.close()


@pytest.mark.slow
def test_an_async_run_resumed_with_fewer_then_more_actors_keeps_every_row_sampleable(tmp_path):
    """The same three sessions through ``train`` (actor processes, resumes from the saved replay
    buffer): every stored transition of the run stays sampleable, its stacks whole."""
    run = tmp_path / "run"
    base = [
        "experiment=none",
        "env=gym",
        "env.id=tests.frame_env:FramePattern-v0",
        "agent.network=mlp",
        "agent.hidden_sizes=[8]",
        f"replay_buffer.frame_stack={STACK}",
        f"replay_buffer.capacity={CAPACITY}",
        "actor_manager.n_envs_per_actor=2",
        "actor_manager.n_actors=2",
        "trainer.warmup_period=300",
        "trainer.max_opts=null",
        "trainer.max_env_steps=1500",
        "trainer.eval_interval=null",
        "trainer.eval_episodes=1",
        "trainer.final_eval_episodes=0",
        "trainer.save_replay_buffer=true",
        "progress=false",
    ]
    train(make_config(tmp_path, *base))
    first = load_checkpoint(run).state.actors["actors"]
    for n_actors in (1, 2):
        budget = load_checkpoint(run).state.env_steps + 1500
        overrides = [f"actor_manager.n_actors={n_actors}", f"trainer.max_env_steps={budget}"]
        train(
            make_config(tmp_path, f"resume={run}", "trust=[tests.frame_env]"), overrides=overrides
        )
    saved = load_checkpoint(run)
    last = saved.state.actors["actors"]
    assert len(last) == 2 and last[1]["incarnation"] > first[1]["incarnation"]
    assert last[1]["received"] > first[1]["received"]  # the returning slot delivered
    buffer = build_components(saved.config, RunSettings.of(saved.config), 0).buffer
    arrays = saved.buffer()
    assert arrays is not None
    buffer.load(saved.state.replay, arrays)
    rows = np.arange(len(buffer))
    live = buffer._live(rows)
    assert live.all(), f"{(~live).sum()} of {len(rows)} stored transitions unsampleable"
    config = saved.config["agent"]
    check_pattern_stacks(buffer._gather(rows), config["n_step"], config["gamma"])
