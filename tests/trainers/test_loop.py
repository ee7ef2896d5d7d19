"""What both trainers share through the one loop: schedules, final evaluation, counters per
session, exploration settings, metric names."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from border_py import train
from border_py.actors.settings import apex_epsilons
from border_py.runs.checkpoint import load_checkpoint

from ..conftest import FEW_FRESH_EVALS, make_config, scalar_tags

TINY = [
    "agent.hidden_sizes=[16]",
    "trainer.eval_episodes=2",
    "trainer.record_interval=50",
    FEW_FRESH_EVALS,
    "progress=false",
]


def test_serial_never_optimizes_on_a_buffer_smaller_than_a_batch(tmp_path):
    # warmup 0 < batch 64 and n_step 3: the first opt steps wait for 64 stored transitions
    summary = train(
        make_config(
            tmp_path,
            "trainer=serial",
            *TINY,
            "trainer.warmup_period=0",
            "trainer.replay_ratio=null",
            "trainer.opt_interval=1",
            "agent.batch_size=64",
            "agent.n_step=3",
            "trainer.max_opts=100",
            "trainer.eval_interval=100",
        )
    )
    assert summary["opt_steps"] == 100
    # 64 transitions need 66 env steps (n-step windows), then one opt step per env step
    assert summary["env_steps"] == 66 + 99


@pytest.fixture(scope="module")
def runs_of_250(tmp_path_factory):
    """``runs_of_250(trainer)``: ``(run dir, summary)`` of a run of 250 opt steps with evaluations
    every 100, trained once per module at its first use; tests only read it."""
    done: dict[str, tuple[Path, dict]] = {}

    def run(trainer: str) -> tuple[Path, dict]:
        if trainer not in done:
            where = tmp_path_factory.mktemp(trainer)
            summary = train(
                make_config(
                    where,
                    f"trainer={trainer}",
                    *TINY,
                    "trainer.warmup_period=100",
                    "trainer.max_opts=250",
                    "trainer.eval_interval=100",
                )
            )
            done[trainer] = (where / "run", summary)
        return done[trainer]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_the_final_weights_are_always_evaluated(runs_of_250, trainer):
    run_dir, summary = runs_of_250(trainer)
    steps = [s for s, _ in scalar_tags(run_dir)["eval/return_mean"]]
    assert steps == [100, 200, 250]
    assert summary["final_return"] == scalar_tags(run_dir)["eval/return_mean"][-1][1]


def test_serial_apex_gives_each_env_its_own_rung_of_the_ladder(tmp_path):
    train(
        make_config(
            tmp_path,
            "trainer=serial",
            *TINY,
            "actor_manager.exploration=apex",
            "actor_manager.n_envs_per_actor=4",
            "trainer.warmup_period=100",
            "trainer.max_opts=100",
            "trainer.eval_interval=100",
        )
    )
    ladder = apex_epsilons(4, 0.4, 7.0)
    (value,) = {v for _, v in scalar_tags(tmp_path / "run")["train/epsilon"]}
    assert value == pytest.approx(sum(ladder) / 4)  # the agent reports the mean of its epsilons


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_both_trainers_write_the_same_metric_names(runs_of_250, trainer):
    run_dir, _ = runs_of_250(trainer)
    tags = set(scalar_tags(run_dir))
    assert tags >= {
        "perf/env_steps",
        "perf/env_steps_per_sec",
        "perf/samples_total",
        "perf/samples_per_sec",
        "perf/opt_steps_per_sec",
        "perf/samples_per_opt_step",
        "perf/replay_ratio",
        "perf/policy_lag",
        "actor/alive",
        "actor/restarts",
        "actor/backpressure",
        "buffer/size",
        "eval/return_mean",
        "eval/env_steps",
    }


@pytest.mark.slow
def test_a_resume_counts_rates_and_transitions_per_session_and_keeps_the_overrides(tmp_path):
    first = train(
        make_config(tmp_path, *TINY, "trainer.warmup_period=100", "trainer.max_opts=200"),
        overrides=["agent.hidden_sizes=[16]", "trainer.max_opts=200"],
    )
    started = time.monotonic()
    second = train(
        make_config(tmp_path, "resume=" + str(tmp_path / "run")),
        overrides=["trainer.max_opts=400"],
    )
    wall = time.monotonic() - started
    acc1, acc2 = first["accounting"], second["accounting"]
    # this session's transitions, and all sessions' together
    assert acc2["sent"] == acc2["received"] < acc2["received_total"]
    assert acc2["received_total"] == acc1["received_total"] + acc2["received"]
    assert second["samples"] == acc2["received_total"]
    # this session's rate: its 200 opt steps over its own time (at least 200 over its wall time)
    assert second["opt_steps_per_sec"] >= 200 / wall
    assert second["opt_steps"] == 400
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["overrides"] == [
        "agent.hidden_sizes=[16]",
        "trainer.max_opts=200",
        "(resume) trainer.max_opts=400",
    ]
    assert load_checkpoint(tmp_path / "run").state.opt_steps == 400


def test_train_from_python_writes_the_runs_log_into_its_run_dir(tmp_path):
    train(
        make_config(
            tmp_path,
            "trainer=serial",
            *TINY,
            "trainer.warmup_period=100",
            "trainer.max_opts=100",
            "trainer.eval_interval=100",
        )
    )
    log = (tmp_path / "run" / "train.log").read_text()
    assert f"run dir: {tmp_path / 'run'}" in log and "opt 100 | env steps" in log


# -- budgets and intervals in env steps ---------------------------------------------------

ENV_STEPS = [
    *TINY,
    "trainer.warmup_period=100",
    "trainer.max_opts=null",
    "trainer.eval_interval=null",
    "trainer.eval_env_interval=300",
    "trainer.save_interval=0",
    "trainer.save_env_interval=300",
]


def _checkpoint_env_steps(run_dir) -> dict[str, int]:
    return {
        p.name: json.loads((p / "meta.json").read_text())["env_steps"]
        for p in sorted((run_dir / "checkpoints").iterdir())
        if p.name != "best"
    }


@pytest.mark.slow
def test_env_step_budget_and_intervals_continue_across_a_resume(tmp_path):
    """Serial: env steps one at a time, an opt step every 2 (batch 128, replay ratio 64); an
    evaluation and a checkpoint at the first opt step of each 300-env-step stretch, and at the end."""
    first = [
        "trainer=serial",
        *ENV_STEPS,
        "trainer.replay_ratio=64",  # not the default: one opt step every 2 env steps
        "trainer.max_env_steps=700",
        "trainer.keep_checkpoints=9",
    ]
    summary = train(make_config(tmp_path, *first), overrides=first)
    assert summary["env_steps"] == 700
    # 128 transitions (130 env steps with 3-step returns) before the first opt step, then one per 2
    assert summary["opt_steps"] == (700 - 130) // 2 + 1
    evals = [int(v) for _, v in scalar_tags(tmp_path / "run")["eval/env_steps"]]
    assert evals[-1] == 700 and [e // 300 for e in evals[:-1]] == [1, 2]
    assert all(e % 300 < 2 for e in evals[:-1])  # the first opt step in each stretch
    assert sorted(_checkpoint_env_steps(tmp_path / "run").values()) == [*evals[:-1], 700]

    train(
        make_config(tmp_path, "resume=" + str(tmp_path / "run")),
        overrides=["trainer.max_env_steps=1400"],
    )
    resumed = load_checkpoint(tmp_path / "run").state
    assert resumed.env_steps == 1400
    evals2 = [int(v) for _, v in scalar_tags(tmp_path / "run")["eval/env_steps"]]
    assert evals2[:3] == evals  # the first session's, then the stretches 3 and 4 and the end
    assert [e // 300 for e in evals2[3:-1]] == [3, 4] and evals2[-1] == 1400
    saved = sorted(_checkpoint_env_steps(tmp_path / "run").values())
    assert saved == [*evals[:-1], 700, *evals2[3:-1], 1400]


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["serial", "async"])
def test_the_run_stops_at_whichever_budget_comes_first(tmp_path, trainer):
    both = [f"trainer={trainer}", *TINY, "trainer.warmup_period=100", "trainer.eval_interval=50"]
    summary = train(
        make_config(tmp_path / "a", *both, "trainer.max_opts=50", "trainer.max_env_steps=1000000")
    )
    assert summary["opt_steps"] == 50 and summary["env_steps"] < 1_000_000
    summary = train(
        make_config(tmp_path / "b", *both, "trainer.max_opts=1000000", "trainer.max_env_steps=1500")
    )
    assert summary["opt_steps"] < 1_000_000
    if trainer == "serial":
        assert summary["env_steps"] == 1500
    else:  # what the actors sampled before the budget halted them still arrives (see below):
        # the crossing batch, then at most queue_size + 1 = 9 batches of <= 100 + 2 env steps
        # (n_step 3) per actor
        assert 1500 <= summary["env_steps"] < 1500 + 100 + 2 * 9 * 102


def test_the_env_step_budget_halts_the_actors_at_once(tmp_path):
    """At ``max_env_steps`` the actors start no new batch: past the batch that reached it, only
    what they had queued (``queue_size`` each) or were sampling arrives. A learner slowed by a
    checkpoint at every opt step lets them run ahead: had they been stopped only when the loop
    ended, each would have queued and sampled once more (4-5 batches past the budget)."""
    summary = train(
        make_config(
            tmp_path,
            *TINY,
            "trainer=async",
            "agent.n_step=1",  # a batch of 10 transitions is 10 env steps
            "actor_manager.n_actors=2",
            "actor_manager.n_buffer=10",
            "actor_manager.queue_size=1",
            "trainer.warmup_period=100",
            "trainer.max_opts=1000000",
            "trainer.max_env_steps=600",
            "trainer.save_interval=1",
            "trainer.keep_checkpoints=1",
            "trainer.eval_interval=100000",
        )
    )
    past = (summary["env_steps"] - 600) // 10  # batches after the one that reached the budget
    assert summary["env_steps"] % 10 == 0 and 0 <= past <= 2 * (1 + 1) - 1
