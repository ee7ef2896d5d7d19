"""The async trainer: learning, weights, exploration, lifecycle, crashes, accounting, artifacts."""

from __future__ import annotations

import logging
import multiprocessing as mp
import re
import signal
import subprocess
import time

import psutil
import pytest
import torch

from border_py import train
from border_py.actors.settings import apex_epsilons
from border_py.transport.weights import SharedWeights

from ..conftest import BORDER, FEW_FRESH_EVALS, REPO, make_config, run_border, scalar_tags

SHORT = [
    "trainer.max_opts=400",
    "trainer.warmup_period=200",
    "trainer.eval_interval=200",
    "trainer.eval_episodes=2",
    "trainer.record_interval=100",
    "trainer.save_interval=200",
    "agent.hidden_sizes=[32]",
    FEW_FRESH_EVALS,
]
ASYNC_TAGS = {
    "perf/samples_total",
    "perf/samples_per_sec",
    "perf/opt_steps_per_sec",
    "perf/samples_per_opt_step",
    "perf/policy_lag",
    "actor/episode_return",
    "actor/episode_length",
    "actor/backpressure",
    "perf/replay_ratio",
    "actor/alive",
    "actor/restarts",
    "buffer/size",
    "train/loss",
    "train/q_mean",
    "train/epsilon",
    "eval/return_mean",
    "eval/return_std",
    "perf/env_steps",
    "perf/env_steps_per_sec",
}


def test_apex_epsilons_follow_the_ladder():
    assert apex_epsilons(1, 0.4, 7) == [0.4]
    assert apex_epsilons(3, 0.4, 7) == pytest.approx([0.4, 0.4**4.5, 0.4**8])


def _read_in_child(weights: SharedWeights, out) -> None:
    version, opt_steps, state = weights.read()
    out.put((version, opt_steps, {k: v.tolist() for k, v in state.items()}))  # plain data back


@pytest.mark.slow
def test_shared_weights_reach_a_child_process_without_pickling_a_state_dict():
    ctx = mp.get_context("spawn")
    state = {"a": torch.arange(6.0).view(2, 3), "b": torch.tensor([7.0])}
    weights = SharedWeights.create(ctx, state)
    assert weights.version == 0
    weights.publish(state, opt_steps=5)
    weights.publish({"a": state["a"] * 2, "b": state["b"]}, opt_steps=9)
    out = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(weights, out))
    child.start()
    version, opt_steps, got = out.get(timeout=60)
    child.join(timeout=30)
    assert (version, opt_steps) == (2, 9)
    assert got == {"a": (state["a"] * 2).tolist(), "b": [7.0]}


@pytest.mark.slow
def test_async_run_accounts_for_every_transition(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    cfg = make_config(
        tmp_path,
        "trainer=async",
        "actor_manager.n_actors=2",
        "actor_manager.exploration=apex",
        *SHORT,
    )
    summary = train(cfg)
    acc = summary["accounting"]
    assert summary["opt_steps"] == 400 and not summary["interrupted"]
    assert acc["sent"] == acc["received"] == summary["samples"] > 200
    assert (
        f"sent {acc['sent']}, received {acc['received']}, dropped at stop {acc['dropped']}"
        in caplog.text
    )
    assert re.search(r"│\s+1 │\s+\d+ │", caplog.text)  # the per-actor table
    tags = scalar_tags(tmp_path / "run")
    assert set(tags) >= ASYNC_TAGS
    assert [s for s, _ in tags["eval/return_mean"]][-1] == 400  # the final weights are evaluated
    # Ape-X: actor 0 acts with eps 0.4, actor 1 with 0.4 ** 8; the logged epsilon is a mean over the
    # window's batches, so it lies between the two (the agent's own schedule starts at 1.0)
    assert all(0.4**8 - 1e-6 <= v <= 0.4 + 1e-6 for _, v in tags["train/epsilon"])


@pytest.mark.slow
def test_serial_and_async_write_the_same_artifacts(tmp_path):
    layouts = {}
    for trainer in ("serial", "async"):
        cfg = make_config(tmp_path / trainer, f"trainer={trainer}", *SHORT)
        train(cfg)
        run = tmp_path / trainer / "run"
        layouts[trainer] = sorted(
            str(p.relative_to(run))
            for p in run.rglob("*")
            if p.is_file() and "tensorboard" not in p.parts
        )
        assert len(list((run / "tensorboard").glob("events.out.tfevents.*"))) == 1
    assert layouts["serial"] == layouts["async"]
    assert "checkpoints/best/policy.pt" in layouts["async"]


@pytest.mark.slow
def test_actor_crash_is_logged_restarted_then_aborts_cleanly(tmp_path):
    out = run_border(
        [
            "train",
            "env=gym",
            "env.id=tests.crash_env:CrashAfter-v0",
            "+env.kwargs.crash_after=300",
            "actor_manager.n_actors=1",
            "actor_manager.max_restarts=1",
            "trainer.max_opts=100000",
            "trainer.eval_interval=100000",  # the evaluator's env would crash too
            "trainer.warmup_period=100",
            "agent.hidden_sizes=[16]",
        ],
        tmp_path,
        env={"PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 1, out.stderr
    log = next((tmp_path / "outputs").glob("*/*/train.log")).read_text()
    assert log.count("actor 0 crashed:\nTraceback") == 2  # both incarnations, with their traceback
    assert "actor 0 died (exit code 1): restart 1 of 1" in log
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("border: error: actor 0 died") and "max_restarts=1" in last
    assert last.endswith("RuntimeError: injected crash; see the log for its traceback")


@pytest.mark.slow
def test_sigint_stops_gracefully_with_a_final_checkpoint_and_no_leftovers(tmp_path):
    proc = subprocess.Popen(
        [
            *BORDER,
            "train",
            "experiment=none",  # no looked-up recipe: it stops at 475
            "trainer.max_opts=1000000",
            "trainer.save_interval=0",
            "trainer.eval_interval=100",
            "agent.hidden_sizes=[16]",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        children: list[psutil.Process] = []
        while time.monotonic() < deadline:  # wait until the run is optimizing (evaluated once)
            logs = list((tmp_path / "outputs").glob("*/*/train.log"))
            children = psutil.Process(proc.pid).children(recursive=True)
            if logs and "opt 100 |" in logs[0].read_text() and len(children) >= 3:
                break
            time.sleep(0.5)
        assert len(children) >= 3  # 2 actors, the evaluator (and Python's resource tracker)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, output
    assert "stopping gracefully" in output
    (run_dir,) = (tmp_path / "outputs").glob("*/*")
    finals = [p for p in (run_dir / "checkpoints").iterdir() if p.name.isdigit()]
    assert len(finals) == 1 and (finals[0] / "agent.pt").is_file()
    time.sleep(0.5)
    assert not [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow
def test_async_dqn_solves_cartpole(tmp_path):
    cfg = make_config(
        tmp_path,
        "seed=0",
        "trainer=async",
        "actor_manager.n_actors=2",
        "trainer.target_return=475",
        "trainer.max_opts=20000",
        FEW_FRESH_EVALS,
    )
    summary = train(cfg)
    assert summary["best_return"] >= 475, summary
    assert summary["accounting"]["sent"] == summary["accounting"]["received"]
