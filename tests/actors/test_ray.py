"""actor_manager=ray on one local Ray (border's, of 2 CPUs, shared by this module's tests):
learning, weights and back-pressure, a hung env, accounting."""

from __future__ import annotations

import logging
import time

import psutil
import pytest
import torch

from border_py import train
from border_py.actors.ray.session import LOCAL, leave, start_local_ray
from border_py.actors.runtime import Actors
from border_py.agents.inference import native_bfloat16
from border_py.config import build
from border_py.errors import ConfigError
from border_py.overrides import to_plain
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components

from ..conftest import FEW_FRESH_EVALS, make_config, scalar_tags
from .test_ray_cli import beyond_loopback, listening

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")

SMALL = [
    "actor_manager=ray",
    "agent.hidden_sizes=[16]",
    "trainer.warmup_period=200",
    "trainer.eval_episodes=2",
    FEW_FRESH_EVALS,
    "progress=false",
]


def _python_helper(p: psutil.Process) -> bool:
    """multiprocessing's resource tracker and forkserver: one each per test session, as in
    conftest."""
    try:
        cmdline = " ".join(p.cmdline())
    except psutil.NoSuchProcess:
        return True
    return "resource_tracker" in cmdline or ("forkserver" in cmdline and "main(" in cmdline)


def _ray_children(infra: set[int]) -> list[psutil.Process]:
    """Children of this process that are neither the shared Ray's node processes nor its idle
    pooled workers (Python's multiprocessing helpers excepted, as in conftest)."""
    left = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(p.cmdline())
        except psutil.NoSuchProcess:
            continue
        if p.pid in infra or _python_helper(p) or cmdline.startswith("ray::IDLE"):
            continue
        left.append(p)
    return left


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module, started as border starts one (listening on the loopback
    interface only, checked); its node processes (raylet, GCS, ...) must all be gone once it is
    shut down."""
    start_local_ray(2, 100 * 2**20)
    infra = {p.pid for p in psutil.Process().children(recursive=True) if not _python_helper(p)}
    found = listening([psutil.Process(), *(psutil.Process(pid) for pid in infra)])
    assert {"gcs_server", "raylet"} <= {name for name, _ in found}, found
    assert beyond_loopback(found) == []
    yield infra
    leave(LOCAL)  # as border stops its own local Ray: its private dir goes too
    children = psutil.Process().children(recursive=True)
    _, alive = psutil.wait_procs([p for p in children if p.pid in infra], timeout=10)
    assert not alive, f"Ray processes left: {[p.cmdline() for p in alive]}"


@pytest.fixture(autouse=True)
def no_leftover_processes(local_ray):
    """conftest's check, minus the module's shared Ray: no actor of a test may outlive it."""
    yield
    deadline = time.monotonic() + 10
    while (left := _ray_children(local_ray)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"leftover processes: {[p.cmdline() for p in left]}"


def _started(tmp_path, *overrides: str):
    """A started backend of the composed config, with the learner-side components."""
    config = to_plain(make_config(tmp_path, *SMALL, *overrides))
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    backend = build("actor_manager", config["actor_manager"]).runtime()
    assert isinstance(backend, Actors)
    backend.start(parts.launch(config, run))
    return backend, parts


def _poll_until(backend, deliver, done, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        backend.poll(0.05, deliver)
        backend.check()
    assert done(), "timed out"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_ray_actors_learn_cartpole(tmp_path):
    cfg = make_config(
        tmp_path,
        "seed=0",
        "actor_manager=ray",
        "actor_manager.n_actors=2",
        "trainer.target_return=475",
        "trainer.max_opts=20000",
        FEW_FRESH_EVALS,
        "progress=false",
    )
    summary = train(cfg)
    assert summary["best_return"] >= 475, summary
    assert summary["accounting"]["sent"] == summary["accounting"]["received"] > 0
    assert summary["restarts"] == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_weights_reach_every_actor_and_back_pressure_holds(tmp_path):
    backend, parts = _started(
        tmp_path,
        "actor_manager.n_actors=2",
        "actor_manager.n_buffer=50",
        "actor_manager.queue_size=2",
        "actor_manager.max_calls_in_flight=1",
    )
    batches = []
    try:
        _poll_until(backend, batches.append, lambda: all(r.received for r in backend.records))
        assert {b.policy_opt_steps for b in batches} == {0}
        backend.publish(parts.agent.policy_state(), 7)
        published, before = time.time(), len(batches)
        _poll_until(
            backend,
            batches.append,
            lambda: {b.actor for b in batches[before:] if b.policy_opt_steps == 7} == {0, 1},
        )
        late = [b for b in batches[before:] if b.policy_opt_steps == 7]
        assert all(published <= b.loaded_at <= time.time() for b in late)
        # the learner stops taking batches: each actor stops once queue_size batches wait
        for _ in range(6):
            backend.check()
            time.sleep(0.5)
        runs = backend._calls.running
        assert [run.waiting() for run in runs] == [2, 2]
        assert [run.running() for run in runs] == [0, 0]
        assert backend.poll(1.0, batches.append) == 4
    finally:
        backend.stop(batches.append)
    acc = backend.accounting()
    assert acc["sent"] == acc["received"] == sum(len(b.transitions) for b in batches)
    assert acc["dropped"] == 0 and all(r.said_bye for r in backend.records)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_hung_env_is_killed_after_heartbeat_timeout_and_its_slot_restarted(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    flag = tmp_path / "hung"
    cfg = make_config(
        tmp_path,
        *SMALL,
        "env=gym",
        "env.id=tests.hang_env:HangOnce-v0",
        "+env.kwargs.hang_after=150",
        f"+env.kwargs.flag={flag}",
        "actor_manager.n_actors=1",
        "actor_manager.heartbeat_timeout=5",
        "trainer.max_opts=300",
        "trainer.eval_interval=300",
    )
    summary = train(cfg)
    assert flag.exists() and summary["opt_steps"] == 300 and not summary["interrupted"]
    assert summary["restarts"] == 1
    assert "(actor_manager.heartbeat_timeout=5): killing it" in caplog.text
    assert "actor 0 died (silent for" in caplog.text
    assert "actor 0 (incarnation 1) runs on node" in caplog.text
    acc = summary["accounting"]
    assert acc["sent"] == acc["received"] == summary["samples"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_resumed_ray_run_continues_each_actor_slot(tmp_path):
    first = train(
        make_config(tmp_path, *SMALL, "trainer.max_opts=200", "trainer.eval_interval=200")
    )
    run = tmp_path / "run"
    resumed = train(
        make_config(tmp_path, f"resume={run}", "trainer.max_opts=400"),
        overrides=["trainer.max_opts=400"],
    )
    assert resumed["opt_steps"] == 400 and resumed["env_steps"] > first["env_steps"]
    acc = resumed["accounting"]
    assert acc["sent"] == acc["received"] > 0
    assert acc["received_total"] == first["accounting"]["received"] + acc["received"]
    log = (run / "train.log").read_text()
    assert "actor 0 (incarnation 1) runs on node" in log  # the next incarnation: fresh seeds


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_actors_beyond_eight_per_cluster_cpu_are_refused_before_any_starts(tmp_path):
    """The module's Ray has 2 CPUs: 17 actors of 0.1 CPU fit its placement group but not the
    bound, checked once connected; 16 start."""
    config = to_plain(
        make_config(
            tmp_path,
            *SMALL,
            "actor_manager.n_actors=17",
            "actor_manager.num_cpus_per_actor=0.1",
            "trainer.max_opts=10",
        )
    )
    run = RunSettings.of(config)
    parts = build_components(config, run, 0)
    backend = build("actor_manager", config["actor_manager"]).runtime()
    launch = parts.launch(config, run)
    with pytest.raises(ConfigError) as refused:
        backend.start(launch)
    assert str(refused.value) == (
        "actor_manager.n_actors=17: 17 actors on 2 CPUs of the Ray cluster, more than 16"
        " (8 per core); lower it (or check_resources=false to run anyway)"
    )
    assert backend._remote is None and backend.alive() == 0  # no actor was started
    backend.stop()
    assert ray.is_initialized()  # the caller's Ray is left as it was


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_policy_dtype_auto_is_decided_by_each_ray_actors_own_cpu(tmp_path, monkeypatch):
    pytest.importorskip("minatar")
    native = native_bfloat16()  # the node's CPU: this machine's, in the Ray workers
    # the learner's CPU says the opposite: the actors act as their own CPU says, not as it does
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {} if native else {"amx_bf16": True})
    cfg = make_config(
        tmp_path,
        *SMALL,
        "env=minatar",
        "agent._target_=tests.actors.test_policy_dtype.ReportingDQN",
        "actor_manager.n_actors=1",
        "trainer.max_opts=100",
        "trainer.eval_interval=100",
        "trainer.record_interval=25",
    )
    summary = train(cfg)
    expected = "bfloat16" if native else "float32"
    assert summary["policy_dtype"] == expected
    run = tmp_path / "run"
    acted = [value for _, value in scalar_tags(run)["test/acting_bfloat16"]]
    assert acted and set(acted) == {float(native)}  # the actor's own word, with every batch
    log = (run / "train.log").read_text()
    assert "acting in bfloat16 on nodes whose CPU has AMX bfloat16 units, float32 on the" in log
    assert "actor 0 (incarnation 0) runs on node" in log
    assert f"), acting in {expected}\n" in log
