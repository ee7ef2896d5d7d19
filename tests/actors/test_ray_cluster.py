"""actor_manager=ray on clusters that listen on the loopback interface only (checked): a two-node
``ray.cluster_utils.Cluster`` (actors on distinct nodes; a lost worker node's actor restarted on
the other), and ``border train`` joining a cluster made with ``ray start --head``.

A cluster keeps 127.0.0.1 as its nodes' address only where Ray runs as on macOS and Windows, one
machine per cluster (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``; border's
:func:`~border_py.actors.ray.session.loopback_ray` in this process), and there ``ray start`` adds
no second node: the multi-node test uses ``Cluster``, whose nodes take the address as given."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from border_py.actors.ray.session import loopback_ray
from border_py.config import build
from border_py.overrides import to_plain
from border_py.runs.settings import RunSettings
from border_py.trainers.components import build_components

from ..conftest import BORDER, FEW_FRESH_EVALS, REPO, make_config
from .test_ray_cli import beyond_loopback, left_behind, listening, ray_tmpdir

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")

SMALL = ["actor_manager=ray", "agent.hidden_sizes=[16]", FEW_FRESH_EVALS, "progress=false"]
STORE = 80 * 2**20  # object store bytes per node
NODE_PROCESSES = ("gcs_server", "raylet")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_actors_spread_over_two_nodes_and_survive_losing_one(tmp_path):
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "object_store_memory": STORE,
            "node_ip_address": "127.0.0.1",
            "_system_config": {"health_check_period_ms": 200, "health_check_failure_threshold": 3},
        },
    )
    backend = None
    try:
        worker = cluster.add_node(
            num_cpus=1, object_store_memory=STORE, node_ip_address="127.0.0.1"
        )
        with loopback_ray():
            ray.init(address=cluster.address)
        head = ray.get_runtime_context().get_node_id()
        nodes = psutil.Process().children(recursive=True)
        found = listening([psutil.Process(), *nodes])
        assert sum(p.name() == "raylet" for p in nodes) == 2
        assert {"gcs_server", "raylet"} <= {name for name, _ in found}, found
        assert beyond_loopback(found) == []
        config = to_plain(make_config(tmp_path, *SMALL, "actor_manager.n_actors=2"))
        run = RunSettings.of(config)
        parts = build_components(config, run, 0)
        backend = build("actor_manager", config["actor_manager"]).runtime()
        backend.start(parts.launch(config, run))
        batches = []

        def run_until(done, seconds=60):
            deadline = time.monotonic() + seconds
            while not done() and time.monotonic() < deadline:
                backend.poll(0.05, batches.append)
                backend.check()
            assert done(), (backend.nodes, [r.incarnation for r in backend.records])

        run_until(lambda: all(backend.nodes) and all(r.received for r in backend.records))
        assert set(backend.nodes) == {head, worker.node_id}  # SPREAD: one actor per node
        lost = backend.nodes.index(worker.node_id)
        cluster.remove_node(worker)
        record = backend.records[lost]
        run_until(lambda: record.incarnation == 1 and record.incarnation_batches >= 2)
        assert backend.nodes == [head, head] and backend.restarts() == 1
        assert backend.records[1 - lost].incarnation == 0  # the other actor went on
        backend.stop(batches.append)
        acc = backend.accounting()
        assert acc["received"] == sum(len(b.transitions) for b in batches) > 0
        assert acc["sent"] == acc["received"]  # the lost incarnation: what arrived
    finally:
        if backend is not None:
            backend.stop()
        ray.shutdown()
        cluster.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_start(args: list[str], env: dict[str, str]) -> None:
    ray_cli = str(Path(sys.executable).with_name("ray"))
    out = subprocess.run(
        [ray_cli, "start", *args, f"--object-store-memory={STORE}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def _stop_cluster(marker: str, ray_tmp: str) -> None:
    """Stop the test's cluster as ``ray stop`` does (SIGTERM, then SIGKILL), but only its own
    processes (``ray stop`` would stop every Ray on the machine)."""
    found = left_behind(marker, ray_tmp)
    for p in found:
        p.terminate()
    _, alive = psutil.wait_procs(found, timeout=5)
    for p in alive:
        p.kill()
    psutil.wait_procs(alive, timeout=5)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_border_train_joins_a_ray_start_cluster_and_leaves_it_as_it_was(tmp_path):
    """As the README's recipe, on one machine: the head started with token authentication
    (``RAY_AUTH_MODE=token`` on its line too), border joining it with the token; the cluster
    listens on 127.0.0.1 only."""
    marker, ray_tmp = f"ray-start-{uuid.uuid4().hex}", ray_tmpdir()
    port = _free_port()
    env = {**os.environ, "BORDER_TEST_MARKER": marker, "RAY_TMPDIR": ray_tmp}
    env |= {"RAY_AUTH_MODE": "token", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    env.pop("RAY_ADDRESS", None)
    run = tmp_path / "run"
    try:
        _ray_start(
            [
                "--head",
                f"--port={port}",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=2",
                "--disable-usage-stats",
                "--include-dashboard=false",
            ],
            env,
        )
        nodes_up = {p.pid for p in left_behind(marker, ray_tmp) if p.name() in NODE_PROCESSES}
        assert len(nodes_up) == 2  # the GCS and the raylet
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        out = subprocess.run(
            [
                *BORDER,
                "train",
                *SMALL,
                f"actor_manager.address=127.0.0.1:{port}",
                "actor_manager.n_actors=2",
                "trainer.max_opts=300",
                "trainer.warmup_period=200",
                "trainer.eval_interval=300",
                "trainer.eval_episodes=2",
                f"run_dir={run}",
            ],
            cwd=tmp_path,
            env={**env, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"},
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        log = (run / "train.log").read_text()
        nodes = re.findall(r"actor (\d) \(incarnation 0\) runs on node \w+ \(([\d.]+)\)", log)
        assert [ip for _, ip in nodes] == ["127.0.0.1"] * 2, nodes
        assert "stopped the local Ray" not in log  # the cluster is not border's to stop
        assert "without token authentication" not in log
        acc = json.loads((run / "result.json").read_text())["summary"]["accounting"]
        assert acc["sent"] == acc["received"] > 0
        # the run's actors are gone; the cluster's own processes all still run, on loopback
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            running = left_behind(marker, ray_tmp)
            if not any("SamplerActor" in " ".join(p.cmdline()) for p in running):
                break
            time.sleep(0.5)
        names = [" ".join(p.cmdline()) for p in running]
        assert not [n for n in names if "SamplerActor" in n], names
        assert nodes_up <= {p.pid for p in running}
        found = listening(running)
        assert {"gcs_server", "raylet"} <= {name for name, _ in found}, found
        assert beyond_loopback(found) == []
    finally:
        _stop_cluster(marker, ray_tmp)
        left = left_behind(marker, ray_tmp)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert not left, [p.cmdline() for p in left]
