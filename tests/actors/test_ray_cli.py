"""``border train actor_manager=ray`` as a user runs it: one-line errors for bad keys and a missing
cluster, Ctrl-C and SIGTERM with a local Ray (final checkpoint, nothing left; until then every
socket of the run listens on the loopback interface only), a crashing env (restarts, then a
one-line abort). Each run starts and stops its own local Ray."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import psutil
import pytest

from border_py.actors.ray import session
from border_py.cli.train import check_overrides
from border_py.errors import ConfigError

from ..conftest import BORDER, FEW_FRESH_EVALS, REPO, run_border

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")

SMALL = [
    "actor_manager=ray",
    "agent.hidden_sizes=[16]",
    "trainer.warmup_period=200",
    "trainer.eval_episodes=2",
    FEW_FRESH_EVALS,
    "progress=false",
]
LOCAL = [*SMALL, "actor_manager.object_store_memory=100000000"]  # a local Ray of 100 MB


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "actor_manager.placement_strategy=EVERYWHERE",
            "actor_manager.placement_strategy='EVERYWHERE': must be one of SPREAD, PACK,",
        ),
        (
            "actor_manager.max_calls_in_flight=0",
            "actor_manager.max_calls_in_flight=0: must be a positive int",
        ),
        (
            "actor_manager.num_cpus_per_actor=0",
            "actor_manager.num_cpus_per_actor=0: must be a positive float",
        ),
        (
            "actor_manager.address=nowhere",
            "actor_manager.address='nowhere': must be null (a local Ray), auto, host:port",
        ),
        (
            "actor_manager.address=127.0.0.1:9",
            "actor_manager.address='127.0.0.1:9': no Ray cluster answers there",
        ),
        (
            "actor_manager.runtime_env=pip",
            "actor_manager.runtime_env='pip': must be null or a mapping",
        ),
    ],
)
def test_bad_ray_keys_are_one_line(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        check_overrides(["actor_manager=ray", override])


def test_a_local_ray_is_bounded_by_this_machines_cores():
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(ConfigError) as refused:
        check_overrides(["actor_manager=ray", f"actor_manager.n_actors={8 * cores + 1}"])
    assert str(refused.value).startswith(
        f"actor_manager.n_actors={8 * cores + 1}: {8 * cores + 1} actors on {cores} usable CPU"
        f" cores, more than {8 * cores} (8 per core)"
    )


def test_joining_a_cluster_without_token_authentication_is_named(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert session._without_token_auth() is None
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert session._without_token_auth() == "RAY_AUTH_MODE is not token here"
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setattr(ray, "__version__", "2.51.2")
    assert session._without_token_auth() == "Ray 2.51.2 has none; it came with Ray 2.52"


def test_object_store_memory_is_for_a_local_ray_only():
    with pytest.raises(ConfigError, match=r"object_store_memory=1000000: must be null when"):
        check_overrides(
            [
                "actor_manager=ray",
                "actor_manager.address=auto",
                "actor_manager.object_store_memory=1000000",
            ]
        )


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_a_closed_cluster_port_is_one_line_exit_2_before_the_run_dir(tmp_path):
    run = tmp_path / "run"
    out = run_border(
        ["train", "actor_manager=ray", "actor_manager.address=127.0.0.1:9", f"run_dir={run}"],
        tmp_path,
        timeout=50,
    )
    assert out.returncode == 2, out.stderr
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "border: error: actor_manager.address='127.0.0.1:9': no Ray cluster answers there"
        )
    )
    assert "Traceback" not in out.stderr and not run.exists()


def _ray_running() -> bool:
    return any(p.info["name"] in ("gcs_server", "raylet") for p in psutil.process_iter(["name"]))


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_address_auto_without_a_cluster_is_one_line_exit_2(tmp_path):
    if _ray_running():
        pytest.skip("a Ray cluster runs on this machine: address=auto would join it")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    env["RAY_TMPDIR"] = str(tmp_path / "no-ray")  # no `ray start` address file there
    proc = subprocess.run(
        [*BORDER, "train", *SMALL, "actor_manager.address=auto"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=110,
        env={**env, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("border: error: actor_manager.address='auto': no Ray cluster to join")
    assert "ray start --head" in last and "Traceback" not in proc.stderr
    assert (  # said before joining
        "actor_manager.address='auto': joining a Ray cluster without token authentication"
        " (RAY_AUTH_MODE is not token here): whoever reaches its ports can run code on it, and in"
        " this learner, which unpickles what its actors send"
    ) in proc.stderr


def left_behind(marker: str, ray_tmp: str) -> list[psutil.Process]:
    """Live processes of a test: those whose environment holds ``BORDER_TEST_MARKER=<marker>``
    (border and its children), and those holding a file under ``ray_tmp``, the Ray temp dir of
    the test (every Ray process logs there: GCS, raylets, agents, workers). The environment
    alone misses Ray's agents: their long process titles overwrite it."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            marked = process.environ().get("BORDER_TEST_MARKER") == marker
            if marked or any(f.path.startswith(ray_tmp) for f in process.open_files()):
                found.append(process)
        except psutil.Error:
            continue
    return found


LOOPBACK = ("127.0.0.1", "::1", "::ffff:127.0.0.1")  # the last: IPv4's, on a dual-stack socket


def listening(processes: list[psutil.Process]) -> list[tuple[str, str]]:
    """(process name, ``ip:port``) of every socket of ``processes`` that listens for TCP."""
    found = []
    for process in processes:
        try:
            name = process.name()
            sockets = process.net_connections(kind="inet")
        except psutil.Error:
            continue
        for s in sockets:
            if s.status == psutil.CONN_LISTEN:
                found.append((name, f"{s.laddr.ip}:{s.laddr.port}"))
    return found


def beyond_loopback(found: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The sockets of :func:`listening` that listen on more than the loopback interface."""
    return [(name, at) for name, at in found if at.rpartition(":")[0] not in LOOPBACK]


def ray_tmpdir() -> str:
    """A fresh Ray temp dir (``RAY_TMPDIR``): short, as Ray's socket paths must be."""
    return tempfile.mkdtemp(prefix="brt", dir="/tmp")


@pytest.fixture
def ray_run():
    """(marker, Ray temp dir) of a test's run; at the end, whatever of the run is left is killed
    and the dir removed (a failed test leaves nothing either)."""
    marker, ray_tmp = f"ray-{uuid.uuid4().hex}", ray_tmpdir()
    yield marker, ray_tmp
    for process in left_behind(marker, ray_tmp):
        process.kill()
    shutil.rmtree(ray_tmp, ignore_errors=True)


def _start(args: list[str], cwd, marker: str, ray_tmp: str) -> subprocess.Popen:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "BORDER_TEST_MARKER": marker, "PYTHONPATH": path}
    env |= {"PYTHONUNBUFFERED": "1", "RAY_TMPDIR": ray_tmp}
    return subprocess.Popen(
        [sys.executable, "-m", "border_py.cli", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _gone(marker: str, ray_tmp: str, seconds: float) -> None:
    """Every process of the run (border, its evaluator, the local Ray's GCS, raylet, agents and
    workers) exits within ``seconds``."""
    deadline = time.monotonic() + seconds
    while (left := left_behind(marker, ray_tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes left: {[' '.join(p.cmdline())[:80] for p in left]}"


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm", "sigterm-group"])
def test_a_stop_signal_stops_gracefully_with_a_final_checkpoint_and_no_ray_process_left(
    tmp_path, ray_run, stop
):
    """Ctrl-C (SIGINT to the process group), SIGTERM to border alone (``kill``: ``ray.init``
    replaces the SIGTERM handler, border must have its own back) and SIGTERM to border then its
    group (``timeout``, a scheduler: the local Ray's processes, in sessions of their own, must not
    end under the graceful stop). Until the signal, every TCP socket that a process of the run
    (border, the local Ray's GCS, raylet, agents, workers, the actors) listens on, looked at every
    half second from the start until at least three looks after the actors were seen, is on
    127.0.0.1."""
    marker, ray_tmp = ray_run
    run = tmp_path / "run"
    seen: set[tuple[str, str]] = set()
    looks_with_actors = 0  # a worker's title (ray::IDLE, then ray::SamplerActor...) read anew
    proc = _start(
        [
            "train",
            "experiment=none",  # no looked-up recipe: it stops at 475
            *LOCAL,
            "trainer.max_opts=1000000",
            "trainer.eval_interval=100",
            "trainer.save_interval=0",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
        ray_tmp,
    )
    try:
        deadline = time.monotonic() + 100
        ray_up = False
        while time.monotonic() < deadline:
            log = run / "train.log"
            running = left_behind(marker, ray_tmp)
            seen |= set(listening(running))
            names = []
            for process in running:
                with contextlib.suppress(psutil.Error):
                    names.append(" ".join(process.cmdline()))
            actors = any("SamplerActor" in n for n in names)
            looks_with_actors += actors
            ray_up = any("raylet" in n for n in names) and actors
            opt_100 = log.is_file() and "opt 100 |" in log.read_text()
            if ray_up and looks_with_actors >= 3 and opt_100:
                break
            time.sleep(0.5)
        assert ray_up, "the local Ray and its actors never ran"
        assert looks_with_actors >= 3, looks_with_actors
        if stop == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # the terminal signals the whole group
        else:
            os.kill(proc.pid, signal.SIGTERM)
            if stop == "sigterm-group":
                os.killpg(proc.pid, signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, output
    name = "SIGINT" if stop == "ctrl-c" else "SIGTERM"
    assert f"{name}: stopping gracefully" in output and "Traceback" not in output
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "interrupted"
    opt_steps = result["summary"]["opt_steps"]
    assert opt_steps >= 100
    assert (run / "checkpoints" / f"{opt_steps:09d}" / "agent.pt").is_file()
    acc = result["summary"]["accounting"]
    assert acc["sent"] == acc["received"] > 0 and result["summary"]["restarts"] == 0
    assert "stopped the local Ray" in (run / "train.log").read_text()
    assert {"gcs_server", "raylet"} <= {name for name, _ in seen}, seen  # seen listening
    assert beyond_loopback(sorted(seen)) == []
    _gone(marker, ray_tmp, 10)


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_a_crashing_env_restarts_its_actor_then_aborts_in_one_line(tmp_path, ray_run):
    marker, ray_tmp = ray_run
    run = tmp_path / "run"
    proc = _start(
        [
            "train",
            *LOCAL,
            "env=gym",
            "env.id=tests.crash_env:CrashAfter-v0",
            "+env.kwargs.crash_after=300",
            "actor_manager.n_actors=1",
            "actor_manager.max_restarts=1",
            "trainer.max_opts=100000",
            "trainer.eval_interval=100000",  # the evaluator's env would crash too
            "trainer.warmup_period=100",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
        ray_tmp,
    )
    try:
        output, _ = proc.communicate(timeout=130)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 1, output
    log = (run / "train.log").read_text()
    assert log.count("actor 0 crashed:") == 2  # both incarnations, with their traceback
    assert log.count("RuntimeError: injected crash") >= 2
    assert "actor 0 died (raised an exception): restart 1 of 1" in log
    assert "actor 0 (incarnation 1) runs on node" in log
    last = output.strip().splitlines()[-1]
    assert last == (
        "border: error: actor 0 died (raised an exception) after 1 restarts"
        " (actor_manager.max_restarts=1): RuntimeError: injected crash; see the log for its"
        " traceback"
    ), output[-3000:]
    assert "stopped the local Ray" in log
    _gone(marker, ray_tmp, 10)
