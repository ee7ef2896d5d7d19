"""R2D2 on the async trainer with local actor processes: the actors carry each env's memory and
send sequences with their initial priorities through their channels; the run trains, evaluates,
checkpoints and resumes from its checkpoint; the gates count env steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from border_py import resources, train
from border_py.actors.runtime import env_steps_per_batch
from border_py.actors.settings import apex_epsilons
from border_py.agents.r2d2 import R2D2
from border_py.errors import ConfigError
from border_py.runs.checkpoint import load_checkpoint
from border_py.runs.state import TrainerState
from border_py.sequences import Sequences
from border_py.trainers.async_trainer import SampleGate
from border_py.trainers.loop import Learner
from border_py.trainers.settings import RunState
from border_py.transport.batch import ReceivedBatch

from ..conftest import make_config, scalar_tags

RECIPE = "experiment=r2d2_popgym_repeatpreviouseasy"
N_ENVS = 3
# the recipe (LSTM 64, burn-in 4, 16 learning steps, a window every 8 steps, replay ratio 8) on 2
# actors of 3 envs, Ape-X epsilons, prioritized replay fed the actors' priorities
ASYNC_R2D2 = [
    RECIPE,
    "trainer=async",
    "actor_manager.n_actors=2",
    f"actor_manager.n_envs_per_actor={N_ENVS}",
    "actor_manager.n_buffer=8",
    "actor_manager.exploration=apex",
    "replay_buffer=sequence_prioritized",
    "replay_buffer.priority_from_actors=true",
    "trainer.max_env_steps=null",
    "trainer.warmup_period=300",
    "trainer.eval_env_interval=null",
    "trainer.eval_interval=50",
    "trainer.eval_episodes=2",
    "trainer.final_eval_episodes=2",
    "trainer.record_interval=10",
    "trainer.save_interval=50",
    "trainer.save_replay_buffer=true",
    "progress=false",
]


def seen(batch: ReceivedBatch, opt_steps: int) -> dict[str, Any]:
    """What a test needs of a batch the learner ingests (its arrays are views of a slot, valid
    only until ingest returns)."""
    sequences = batch.transitions
    out: dict[str, Any] = {
        "kind": type(sequences).__name__,
        "actor": batch.actor,
        "env_steps": batch.env_steps,
        "lag": opt_steps - batch.policy_opt_steps,
        "policy_opt_steps": batch.policy_opt_steps,
        "epsilon": batch.exploration.get("train/epsilon"),
    }
    if isinstance(sequences, Sequences):
        priority = sequences.priority
        starts = sequences.burn < sequences.burn_in  # windows that start their episode
        out |= {
            "rows": len(sequences),
            "priorities": priority is not None
            and priority.shape == (len(sequences),)
            and bool(np.isfinite(priority).all() and (priority >= 0).all()),
            "fresh_state_at_starts": bool((sequences.state[starts] == 0).all()),
            "some_memory": bool((sequences.state[~starts] != 0).any()),
            "streams": None  # each sequence's key's stream (its actor incarnation's env)
            if sequences.key is None or sequences.key.shape != (len(sequences), 3)
            else frozenset(sequences.key[:, 0].tolist()),
        }
    return out


def streams_of(batches: list[dict[str, Any]], actor: int) -> frozenset[int]:
    """The key streams of ``actor``'s batches among ``batches`` (:func:`seen`), each batch's
    checked to carry keys."""
    mine = [b["streams"] for b in batches if b["actor"] == actor]
    assert mine and all(s is not None for s in mine)
    return frozenset().union(*mine)


def train_and_watch(config: Any, **kwargs: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``train(config)`` with every batch the learner ingests noted (:func:`seen`)."""
    noted: list[dict[str, Any]] = []
    ingest = Learner.ingest

    def watch(self: Learner, batch: ReceivedBatch) -> None:
        noted.append(seen(batch, self.state.opt_steps))
        ingest(self, batch)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Learner, "ingest", watch)
        summary = train(config, **kwargs)
    return summary, noted


def resumed_budget(saved: TrainerState) -> list[str]:
    """A resumed session's budget in env steps, so that it ends only once its actors sent data:
    a first session's actors run ahead of its learner (queued batches, the slack), and the
    restored buffer alone may feed a budget of opt steps. 1600 env steps: enough for both actors
    to send, whichever starts first (CI saw one actor deliver 400 alone)."""
    return ["trainer.max_opts=null", f"trainer.max_env_steps={saved.env_steps + 1600}"]


def no_children_left() -> list[psutil.Process]:
    """Children of this process still alive once the run returned (multiprocessing's resource
    tracker and fork server excepted, as in conftest)."""
    left = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(p.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "resource_tracker" in cmdline or ("forkserver" in cmdline and "main(" in cmdline):
            continue
        left.append(p)
    _, alive = psutil.wait_procs(left, timeout=5)
    return alive


def test_the_gate_of_a_recurrent_agent_counts_env_steps():
    """Its samples are sequences (one per ``period`` env steps and env): the replay ratio and
    the warmup count env steps, as in the serial trainer."""
    gate = SampleGate(
        warmup_period=100, batch_size=4, min_samples_per_opt=2, max_samples_per_opt=2,
        slack=10, env_steps=True,
    )  # fmt: skip
    state = RunState(opt_steps=0, env_steps=99, samples=1000)  # many sequences, few env steps
    assert not gate.may_optimize(state, buffered=1000)  # the warmup's env steps
    state.env_steps = 102
    assert gate.may_optimize(state, buffered=1000)  # 100 + (0 + 1) * 2
    assert not gate.may_optimize(state, buffered=3)  # a batch first
    state.opt_steps = 1
    assert not gate.may_optimize(state, buffered=1000)  # 100 + 2 * 2 env steps for the next
    state.env_steps = 115
    assert not gate.may_ingest(state, buffered=1000)  # 100 + 2 * 2 + 10 slack
    gate.restart(state)
    assert gate.state() == {"base_samples": 115, "base_opts": 1}
    assert not gate.may_optimize(state, buffered=1000)  # the warmup again, from 115
    by_samples = SampleGate(100, 4, 2, 2, slack=10)
    assert by_samples.may_optimize(RunState(0, 0, 102), buffered=1000)  # transitions: samples


def test_a_batch_of_sequences_stands_for_period_env_steps_each(tiny_config):
    from omegaconf import OmegaConf

    from border_py.runs.settings import RunSettings
    from border_py.trainers.components import build_components

    config = OmegaConf.to_container(tiny_config("agent=r2d2", "replay_buffer=sequence"))
    assert isinstance(config, dict)
    agent = build_components(config, RunSettings.of(config), 0).agent
    assert isinstance(agent, R2D2) and agent.period == 8
    assert env_steps_per_batch(10, agent) == 80


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> dict[str, Any]:
    """One async R2D2 run of 100 opt steps, resumed from its checkpoint for 1600 env steps more;
    every batch the learner ingested noted, in each session."""
    root = tmp_path_factory.mktemp("r2d2_async")
    first, noted = train_and_watch(make_config(root, *ASYNC_R2D2, "trainer.max_opts=100"))
    left_first = no_children_left()
    saved = load_checkpoint(root / "run")
    stored = saved.buffer()  # read now: the resumed session may replace this checkpoint
    stored = None if stored is None else {k: np.array(v) for k, v in stored.items()}
    second, noted_after = train_and_watch(
        make_config(root, "resume=" + str(root / "run")), overrides=resumed_budget(saved.state)
    )
    return {
        "run": root / "run",
        "first": first,
        "second": second,
        "noted": noted,
        "noted_after": noted_after,
        "saved": saved,
        "stored": stored,
        "left": left_first + no_children_left(),
    }


@pytest.mark.slow
def test_actor_processes_send_sequences_with_their_priorities_and_memory(local_run):
    noted, first = local_run["noted"], local_run["first"]
    batches = [b for b in noted if b["kind"] != "NoneType"]
    assert batches and {b["kind"] for b in batches} == {"Sequences"}
    assert all(b["priorities"] for b in batches)  # scored by each actor's copy of the agent
    assert all(b["fresh_state_at_starts"] for b in batches)  # zeros at every episode start
    assert any(b["some_memory"] for b in batches)  # and a real state mid-episode
    assert {b["actor"] for b in batches} == {0, 1}
    assert not streams_of(batches, 0) & streams_of(batches, 1)  # keys through the channels
    rows = sum(b["rows"] for b in batches)
    acc = first["accounting"]
    assert acc["sent"] == acc["received"] == first["samples"] == rows  # sequences, all of them
    assert first["env_steps"] == sum(b["env_steps"] for b in noted)
    # weights refreshed: later batches were sampled with the learner's newer weights
    assert max(b["policy_opt_steps"] for b in batches) > 0
    assert all(b["lag"] >= 0 for b in batches)
    # Ape-X: env j of actor i acts with rung i * 3 + j of the 6; each actor reports its mean
    ladder = apex_epsilons(2 * N_ENVS, 0.4, 7.0)
    for actor in (0, 1):
        expected = float(np.mean(ladder[actor * N_ENVS : (actor + 1) * N_ENVS]))
        reported = [b["epsilon"] for b in batches if b["actor"] == actor]
        assert reported == pytest.approx([expected] * len(reported))
    assert local_run["left"] == []  # every actor and the evaluator gone, after each session


@pytest.mark.slow
def test_the_async_r2d2_run_evaluates_checkpoints_and_records(local_run):
    run: Path = local_run["run"]
    tags = scalar_tags(run)
    assert {"train/loss", "perf/policy_lag", "perf/replay_ratio", "eval/return_mean"} <= set(tags)
    assert [s for s, _ in tags["eval/return_mean"]][:2] == [50, 100]
    assert (run / "checkpoints" / "best" / "policy.pt").is_file()
    saved = local_run["saved"]
    assert saved.state.opt_steps == 100
    stored = local_run["stored"]
    assert stored is not None and stored["state"].shape[1:] == (2, 64)  # sequences, their states
    first = local_run["first"]
    assert first["final_eval"]["episodes"] == 2


@pytest.mark.slow
def test_a_resumed_async_r2d2_run_continues_from_its_checkpoint(local_run):
    """What the async trainer resumes for DQN's n-step windows, it resumes for sequences: the
    counters, replay (its sequences, their priorities and states), agent and schedules continue;
    each actor slot starts its next incarnation on fresh episodes (new env seeds), whose memory
    starts from zeros as at every episode start, and the windows the stopped session had open
    are not sent (as DQN's pending n-step windows)."""
    second, run = local_run["second"], local_run["run"]
    saved = local_run["saved"].state  # at opt step 100 (what the stop drained after it is not)
    assert second["opt_steps"] > 100 and second["env_steps"] >= saved.env_steps + 1600
    acc = second["accounting"]
    assert acc["sent"] == acc["received"] == second["samples"] - saved.samples > 0
    assert acc["received_total"] == saved.samples + acc["received"]
    after = [b for b in local_run["noted_after"] if b["kind"] == "Sequences"]
    assert after and all(b["priorities"] and b["fresh_state_at_starts"] for b in after)
    assert all(b["policy_opt_steps"] >= 100 for b in after)  # the resumed agent's weights
    before = [b for b in local_run["noted"] if b["kind"] == "Sequences"]
    for actor in (0, 1):  # the next incarnations cut their sequences under new streams
        assert not streams_of(after, actor) & streams_of(before, actor)
    steps = [s for s, _ in scalar_tags(run)["train/loss"]]
    assert steps == sorted(set(steps)) and steps[-1] <= second["opt_steps"]  # none twice
    newest = load_checkpoint(run)
    final, slots = newest.state.actors["actors"], saved.actors["actors"]
    assert [a["incarnation"] for a in final] == [b["incarnation"] + 1 for b in slots]
    assert sum(a["received"] for a in final) == newest.state.samples >= saved.samples
    before, now = local_run["stored"], newest.buffer()
    assert before is not None and now is not None
    n = len(before["burn"])
    for name in ("obs", "state", "burn", "ret", "mask"):  # the saved sequences, restored
        assert now[name][:n].tobytes() == before[name][:n].tobytes(), name


def test_an_async_r2d2_run_too_large_for_this_machine_is_refused_before_it_starts(
    tmp_path, monkeypatch
):
    """The bounds hold for sequences in the async trainer: the replay's ``capacity`` sequences of
    ``T`` steps, and the actors' slots of whole sequences against ``/dev/shm``."""
    r2d2 = ("trainer=async", "agent=r2d2", "replay_buffer=sequence")  # on CartPole
    with pytest.raises(ConfigError, match=r"^replay_buffer.capacity=100000000: the replay buffer"):
        train(make_config(tmp_path, *r2d2, "replay_buffer.capacity=1e8"))
    monkeypatch.setattr(resources, "free_shared_memory", lambda: 2**20)
    # T = 8 + 16 + 5 = 29 steps, an LSTM state (2, 64); 100 + 1 x (1 + ceil(21 / 8)) = 104 rows
    # of 29 x (16 + 8 + 4 + 1) B, 512 B of state, 8 + 8 + 4 B, 16 x (4 + 4 + 8 + 1) B, a key of
    # 3 x 8 B, and 105 episodes (8 + 8 B), each array padded to 64 B: 175,488 B a slot
    with pytest.raises(ConfigError) as refused:
        train(make_config(tmp_path, *r2d2))
    assert str(refused.value) == (
        "actor_manager.n_actors=2 x queue_size=8: 16 slots of 171.4 KiB (n_buffer=100,"
        " n_envs_per_actor=1) need ~2.7 MiB of shared memory, more than the 1.0 MiB free in"
        " /dev/shm; lower them (or check_resources=false to run anyway)"
    )
    assert not (tmp_path / "run").exists()
