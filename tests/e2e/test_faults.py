"""The runtime under real faults: whatever dies, stalls or is interrupted, no orphan, no hang, no
lost run. Every test drives the real ``border`` command in a subprocess and does the killing."""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from ..conftest import (
    BORDER,
    REPO,
    processes_with_marker,
    run_border,
    selected_cases,
    two_at_a_time,
)

SMALL = [
    "experiment=none",  # the runtime under test, not a recipe's budget or early stop
    "agent.hidden_sizes=[16]",
    "trainer.warmup_period=200",
    "trainer.eval_episodes=2",
    "trainer.final_eval_episodes=2",  # a completed run's fresh evaluations (default: 100 each)
    "progress=false",
]


def _start(args: list[str], cwd: Path, marker: str, **popen: object) -> subprocess.Popen:
    """``border <args>`` in a subprocess whose descendants carry ``marker`` in their env."""
    env = {
        **os.environ,
        "BORDER_TEST_MARKER": marker,
        "PYTHONUNBUFFERED": "1",
        # the repo (tests' own modules) and the caller's (a worktree's src/ before the install)
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen(
        [*BORDER, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,  # type: ignore[arg-type]
    )


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _gone_within(marker: str, seconds: float) -> float:
    """Seconds until no process carries ``marker`` (fails after ``seconds``)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not processes_with_marker(marker):
            return time.monotonic() - start
        time.sleep(0.05)
    left = [(p.pid, " ".join(p.cmdline())[:80]) for p in processes_with_marker(marker)]
    for p in processes_with_marker(marker):
        p.kill()
    raise AssertionError(f"processes left {seconds} s after the kill: {left}")


def _log(run_dir: Path) -> str:
    path = run_dir / "train.log"
    return path.read_text() if path.is_file() else ""


@pytest.mark.slow
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_kill_9_of_main_leaves_no_descendant(tmp_path, start_method):
    marker = f"kill9-{start_method}-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    proc = _start(
        [
            "train",
            *SMALL,
            "trainer.max_opts=1000000",
            "trainer.eval_interval=100",
            "actor_manager.n_actors=3",
            f"actor_manager.start_method={start_method}",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
    )
    try:
        _wait_for(lambda: "opt 100 |" in _log(run), 120, "the first evaluation")
        # 3 actors and the evaluator (and, with the forkserver, the server) are running
        assert len(processes_with_marker(marker)) >= 5
        proc.kill()
        proc.wait(timeout=10)
        seconds = _gone_within(marker, 5.0)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"kill -9 of main ({start_method}): last descendant gone after {seconds:.2f} s")


@pytest.mark.slow
def test_kill_9_of_the_forkserver_and_two_actors_at_once_never_hangs(tmp_path):
    marker = f"forkserver-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    proc = _start(
        [
            "train",
            *SMALL,
            "trainer.max_opts=3000",
            "trainer.eval_interval=500",
            "actor_manager.n_actors=3",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
    )
    try:
        _wait_for(lambda: "opt 500 |" in _log(run), 120, "the first evaluation")
        main = psutil.Process(proc.pid)
        (server,) = [c for c in main.children() if "forkserver" in " ".join(c.cmdline())]
        workers = sorted(server.children(), key=lambda p: p.create_time())
        victims = [server, *workers[-2:]]  # the server and two actors (the evaluator came first)
        for victim in victims:
            victim.kill()
        output, _ = proc.communicate(timeout=180)  # never a hang
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    result = json.loads((run / "result.json").read_text())
    if proc.returncode == 0:
        assert result["status"] == "completed" and result["summary"]["opt_steps"] == 3000
        assert "restart 1 of 3" in _log(run)
    else:  # or one clear line
        assert proc.returncode == 1 and output.strip().splitlines()[-1].startswith("border: error:")
    assert "Traceback" not in output
    _gone_within(marker, 5.0)


def _forkserver(main: psutil.Process) -> psutil.Process | None:
    """The fork server among ``main``'s children (multiprocessing's: its command line runs
    ``forkserver.main(...)``)."""
    for child in main.children():
        with contextlib.suppress(psutil.Error):
            cmdline = " ".join(child.cmdline())
            if "forkserver" in cmdline and "main(" in cmdline:
                return child
    return None


@pytest.mark.slow
def test_kill_9_of_the_forkserver_before_the_first_evaluation_is_recovered(tmp_path):
    """Every child of the fork server dies with it, and multiprocessing reads each one's exit code
    as 255: the evaluator, before its first result, must not be taken for one that failed."""
    marker = f"forkserver-early-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    proc = _start(
        [
            "train",
            "trainer=async",
            *SMALL,
            "actor_manager.n_actors=8",
            "trainer.max_opts=600",
            "trainer.eval_interval=300",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
    )
    try:
        main = psutil.Process(proc.pid)
        server: list[psutil.Process] = []

        def started() -> bool:  # the 8 actors and the evaluator
            found = _forkserver(main)
            if found is not None and len(found.children()) >= 9:
                server[:] = [found]
            return bool(server)

        _wait_for(started, 120, "the actors and the evaluator")
        assert "eval return" not in _log(run)  # before the first evaluation
        server[0].kill()
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, output[-3000:]
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "completed" and result["summary"]["opt_steps"] == 600
    assert (run / "checkpoints" / "best" / "meta.json").is_file()
    log = _log(run)
    assert "the evaluator died (its fork server died): restart 1 of 3" in log
    assert "Traceback" not in output
    _gone_within(marker, 5.0)


@pytest.mark.slow
def test_a_hung_env_is_detected_killed_and_its_actor_restarted(tmp_path):
    marker = f"hang-{uuid.uuid4().hex}"
    run, flag = tmp_path / "run", tmp_path / "hung"
    proc = _start(
        [
            "train",
            *SMALL,
            "env=gym",
            "env.id=tests.hang_env:HangOnce-v0",
            "+env.kwargs.hang_after=150",
            f"+env.kwargs.flag={flag}",
            "actor_manager.n_actors=1",  # the learner starves until the restart
            "actor_manager.heartbeat_timeout=3",
            "trainer.max_opts=1500",
            "trainer.eval_interval=500",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
    )
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, output[-3000:]
    log = _log(run)
    assert flag.exists()  # an actor did hang
    assert "silent for" in log and "(actor_manager.heartbeat_timeout=3): killing it" in log
    assert "restart 1 of 3" in log
    assert json.loads((run / "result.json").read_text())["summary"]["opt_steps"] == 1500
    _gone_within(marker, 5.0)


@pytest.mark.slow
def test_a_killed_evaluator_is_restarted_and_the_run_completes(tmp_path):
    marker = f"evaluator-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    proc = _start(
        [
            "train",
            *SMALL,
            "trainer.max_opts=2000",
            "trainer.eval_interval=250",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
    )
    try:
        _wait_for(lambda: "opt 250 |" in _log(run), 120, "the first evaluation")
        main = psutil.Process(proc.pid)
        (server,) = [c for c in main.children() if "forkserver" in " ".join(c.cmdline())]
        evaluator = min(server.children(), key=lambda p: p.create_time())  # started first
        evaluator.kill()
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, output[-3000:]
    log = _log(run)
    assert "the evaluator died (exit code -9): restart 1 of 3" in log
    assert "opt 2000 |" in log  # evaluations go on after the restart, up to the final weights
    _gone_within(marker, 5.0)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def refused_into_earlier(request, tmp_path_factory) -> dict[str, Exception | None]:
    """:func:`a_fresh_run_into_an_earlier_runs_dir` for every selected key, two at a time: what
    each raised."""
    test = "test_a_fresh_run_into_an_earlier_runs_dir_is_refused_and_changes_nothing"
    keys = [case["key"] for case in selected_cases(request, test)]
    errors = two_at_a_time(
        lambda key: a_fresh_run_into_an_earlier_runs_dir(tmp_path_factory.mktemp("earlier"), key),
        keys,
    )
    return dict(zip(keys, errors, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("key", ["run_dir", "hydra.run.dir"])
def test_a_fresh_run_into_an_earlier_runs_dir_is_refused_and_changes_nothing(
    refused_into_earlier, key
):
    if (error := refused_into_earlier[key]) is not None:
        raise error


def a_fresh_run_into_an_earlier_runs_dir(tmp_path: Path, key: str) -> None:
    """A run into ``tmp_path``, then a fresh run given its dir with ``key``: refused in one
    line, the dir byte-identical, no other run dir made."""
    run = tmp_path / "run"
    short = ["trainer=serial", "trainer.max_opts=200", "trainer.eval_interval=100", *SMALL]
    first = run_border(["train", *short, f"{key}={run}"], tmp_path)
    assert first.returncode == 0, first.stderr
    before = _snapshot(run)
    assert "checkpoints/000000200/agent.pt" in before and ".hydra/config.yaml" in before
    second = run_border(["train", *short, "seed=7", f"{key}={run}"], tmp_path)
    assert second.returncode == 2
    (line,) = second.stderr.strip().splitlines()
    assert line.startswith(f"border: error: {key}={run}: holds an earlier run")
    assert f"resume={run}" in line and "resume=auto" in line
    assert _snapshot(run) == before  # byte-identical, nothing added
    assert not (tmp_path / "outputs").exists()  # and no other run dir was made


@pytest.mark.slow
def test_run_dir_keeps_every_file_of_the_run_together(tmp_path):
    run = tmp_path / "run"
    out = run_border(
        ["train", "trainer=serial", "trainer.max_opts=100", *SMALL, f"run_dir={run}"], tmp_path
    )
    assert out.returncode == 0, out.stderr
    for name in (".hydra/config.yaml", "train.log", "result.json", "tensorboard", "checkpoints"):
        assert (run / name).exists(), name
    assert not (tmp_path / "outputs").exists()


@pytest.mark.slow
def test_resume_auto_starts_fresh_continues_and_does_nothing_once_complete(tmp_path):
    run = tmp_path / "run"
    base = ["train", "trainer=serial", *SMALL, "trainer.eval_interval=100", f"run_dir={run}"]
    empty = run_border([*base, "trainer.max_opts=200", "resume=auto"], tmp_path)
    assert empty.returncode == 0, empty.stderr  # nothing there: a fresh run
    assert json.loads((run / "result.json").read_text())["summary"]["opt_steps"] == 200
    # a requeued job whose run was preempted after its last checkpoint: it continues
    result = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps(result | {"status": "interrupted"}))
    more = run_border([*base, "trainer.max_opts=300", "resume=auto"], tmp_path)
    assert more.returncode == 0, more.stderr
    summary = json.loads((run / "result.json").read_text())["summary"]
    assert summary["opt_steps"] == 300
    assert sorted(p.name for p in (run / "checkpoints").iterdir())[:2] == ["000000200", "000000300"]
    # once complete, a requeued job has nothing to do
    done = run_border([*base, "trainer.max_opts=300", "resume=auto"], tmp_path)
    assert done.returncode == 0 and "has completed; nothing to do" in done.stderr
    assert json.loads((run / "result.json").read_text())["summary"] == summary


@pytest.mark.slow
def test_resume_auto_sets_an_attempt_without_checkpoint_aside(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train.log").write_text("an attempt killed before its first checkpoint\n")
    (run / "tensorboard").mkdir()
    (run / "tensorboard" / "events.out.tfevents.1.host").write_bytes(b"partial")
    out = run_border(
        [
            "train",
            "trainer=serial",
            *SMALL,
            "trainer.max_opts=100",
            f"run_dir={run}",
            "resume=auto",
        ],
        tmp_path,
    )
    assert out.returncode == 0, out.stderr
    kept = run / "attempts" / "1"
    assert (kept / "train.log").read_text() == "an attempt killed before its first checkpoint\n"
    assert (kept / "tensorboard" / "events.out.tfevents.1.host").read_bytes() == b"partial"
    assert json.loads((run / "result.json").read_text())["status"] == "completed"


@pytest.mark.slow
def test_a_requeued_sweep_with_resume_auto_continues_its_killed_job_and_skips_the_done_one(
    tmp_path,
):
    sweep = tmp_path / "sweep"
    base = [
        "train",
        "-m",
        "trainer=serial",
        *SMALL,
        "trainer.save_interval=100",
        "trainer.eval_interval=100",
        "resume=auto",
        f"hydra.sweep.dir={sweep}",
    ]
    marker = f"requeue-{uuid.uuid4().hex}"
    first = _start(
        [*base, "trainer.max_opts=200,1000000"], tmp_path, marker, start_new_session=True
    )
    try:  # the scheduler preempts the job: job 1 dies by kill -9 after its first checkpoint
        _wait_for(
            lambda: (sweep / "1" / "checkpoints" / "000000100" / "meta.json").is_file(),
            240,
            "job 1's first checkpoint",
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    done_before = (sweep / "0" / "result.json").read_bytes()
    assert not (sweep / "1" / "result.json").exists()
    # the kill lands within a poll of the first checkpoint: a fast machine may have saved more
    newest = max(int(p.name) for p in (sweep / "1" / "checkpoints").glob("0*"))
    more = newest + 200

    requeued = run_border([*base, f"trainer.max_opts=200,{more}"], tmp_path)

    assert requeued.returncode == 0, requeued.stderr[-3000:]
    assert (sweep / "0" / "result.json").read_bytes() == done_before  # nothing to do there
    assert "has completed; nothing to do" in _log(sweep / "0")
    result = json.loads((sweep / "1" / "result.json").read_text())
    assert result["status"] == "completed"
    assert result["summary"]["opt_steps"] == more
    assert f"(resume) trainer.max_opts={more}" in result["overrides"]
    assert not (sweep / "1" / "attempts").exists()  # it continued: nothing set aside


@pytest.mark.slow
def test_resume_auto_needs_a_run_dir(tmp_path):
    out = run_border(["train", "resume=auto"], tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "border: error: resume=auto: needs the dir to continue in: run_dir=<dir> (or"
        " hydra.run.dir=<dir>), the same for every attempt of a requeued job"
    )


@pytest.mark.slow
def test_a_failing_checkpoint_write_ends_the_run_in_one_line_and_keeps_earlier_ones(tmp_path):
    run = tmp_path / "run"
    # bytes per file: the first checkpoint's replay observations (replay_buffer/obs.npy: ~2,200
    # CartPole observations of 16 bytes, at replay ratio 64: one opt step every 2 env steps) fit,
    # the second's (~4,200) do not
    limit = 50_000

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(
        [
            *BORDER,
            "train",
            "trainer=serial",
            *SMALL,
            "trainer.max_opts=2000",
            "trainer.replay_ratio=64",  # the env steps per opt step the limit above counts on
            "trainer.save_interval=1000",
            "trainer.eval_interval=1000",
            "trainer.save_replay_buffer=true",
            "trainer.keep_checkpoints=5",
            f"run_dir={run}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=small_files,
    )
    assert proc.returncode == 1, proc.stderr
    (line,) = [x for x in proc.stderr.strip().splitlines() if x.startswith("border:")]
    assert "could not be written (File too large); the earlier checkpoints are intact" in line
    assert "Traceback" not in proc.stderr
    checkpoints = run / "checkpoints"
    names = sorted(p.name for p in checkpoints.iterdir())
    assert "000001000" in names and not [n for n in names if n.startswith(".")]  # no temp dirs
    assert json.loads((run / "result.json").read_text())["status"] == "failed"
    from border_py.runs.checkpoint import load_checkpoint

    assert load_checkpoint(checkpoints / "000001000").state.opt_steps == 1000


LAUNCHERS = {
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "submitit_local": ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10"],
}


@pytest.mark.slow
@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_a_parallel_sweep_with_a_failing_job_exits_1_and_the_other_job_completes(
    tmp_path, launcher
):
    marker = f"{launcher}-{uuid.uuid4().hex}"
    proc = _start(
        [
            "train",
            "-m",
            *LAUNCHERS[launcher],
            "env=gym",
            "env.id=tests.crash_env:CrashAfter-v0",
            "+env.kwargs.crash_after=10,100000",
            "actor_manager.n_actors=1",
            "trainer.max_opts=300",
            "trainer.eval_interval=150",
            *SMALL,
        ],
        tmp_path,
        marker,
    )
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, output[-3000:]
    *_, error, last = output.strip().splitlines()
    assert error.startswith("border: error: 1 of 2 sweep jobs failed")
    assert last.startswith("border: 2 jobs, 1 completed, 1 failed; compare them: border report ")
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    statuses = {
        job.name: json.loads((job / "result.json").read_text())["status"]
        for job in sweep.iterdir()
        if (job / "result.json").is_file()
    }
    assert statuses == {"0": "failed", "1": "completed"}
    assert str(sweep / "0") in error
    assert last.endswith(f"border report {sweep.relative_to(tmp_path)}")
    _gone_within(marker, 5.0)


# Ctrl-C from 0.5 s after the start to mid-training: startup, warmup, first publication, training.
CTRL_C_BANDS = [
    (0.5, 1.0),
    (1.0, 2.0),
    (2.0, 3.5),
    (3.5, 5.0),
    (5.0, 7.0),
    (7.0, 10.0),
    (10.0, 15.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("band", CTRL_C_BANDS, ids=[f"{a}-{b}s" for a, b in CTRL_C_BANDS])
def test_ctrl_c_at_any_moment_stops_cleanly(tmp_path, band):
    delay = random.uniform(*band)
    marker = f"ctrlc-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    proc = _start(
        [
            "train",
            *SMALL,
            "trainer.max_opts=1000000",
            "trainer.eval_interval=300",
            "trainer.save_interval=500",
            "actor_manager.n_actors=4",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the signal goes to the whole group
    started = time.monotonic()
    try:
        output, _ = proc.communicate(timeout=15 + 5)  # the limit, plus this machine's load
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"no exit within 15 s of a Ctrl-C at {delay:.2f} s") from None
    seconds = time.monotonic() - started
    assert proc.returncode == 130, f"Ctrl-C at {delay:.2f} s: exit {proc.returncode}\n{output}"
    assert "Traceback" not in output, f"Ctrl-C at {delay:.2f} s:\n{output}"
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "interrupted", result
    opt_steps = result["summary"]["opt_steps"]
    if opt_steps:  # a checkpoint whenever an opt step was made
        assert (run / "checkpoints" / f"{opt_steps:09d}" / "agent.pt").is_file()
    _gone_within(marker, 5.0)
    print(f"Ctrl-C at {delay:.2f} s: exit 130 after {seconds:.2f} s, {opt_steps} opt steps")


def _one_stop_on_two_signals(tmp_path: Path, index: int) -> str:
    """Train until the first periodic checkpoint, then at a random moment send SIGINT to border and
    to its process group: back to back in even runs (``timeout -s INT`` does that), ``gap``
    seconds apart in odd ones (a wrapper forwarding a Ctrl-C that the terminal also sent to the
    group). Check that it was one graceful stop; return a line on it."""
    marker = f"sigint2-{uuid.uuid4().hex}"
    run = tmp_path / f"run{index}"
    proc = _start(
        [
            "train",
            *SMALL,
            "trainer.max_opts=1000000",
            "trainer.replay_ratio=1",  # the learner waits for data, as with a slow env
            "trainer.save_interval=20",  # the first checkpoint: opt steps were made
            "trainer.eval_interval=200",
            f"run_dir={run}",
        ],
        tmp_path,
        marker,
        start_new_session=True,  # its own process group, which the test runner is outside of
    )
    gap = 0.0 if index % 2 == 0 else random.uniform(0.001, TWO_SIGNALS_MAX_GAP)
    try:
        _wait_for(lambda: any(run.glob("checkpoints/0*")), 120, "the first periodic checkpoint")
        delay = random.uniform(0.0, 2.0)
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGINT)
        if gap:
            time.sleep(gap)
        os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    what = f"run {index}: signals {gap * 1000:.0f} ms apart, {delay:.2f} s after the 1st checkpoint"
    assert proc.returncode == 130, f"{what}: exit {proc.returncode}\n{output}"
    assert "stopping now" not in output and "Traceback" not in output, f"{what}:\n{output}"
    result = json.loads((run / "result.json").read_text())
    summary = result.get("summary")
    assert result["status"] == "interrupted" and summary, f"{what}: {result}"
    final = max(run.glob("checkpoints/0*"))
    meta = json.loads((final / "meta.json").read_text())
    assert final.name == f"{summary['opt_steps']:09d}", f"{what}: {final.name}, {summary}"
    assert meta["opt_steps"] == summary["opt_steps"] > 0, f"{what}: {meta}, {summary}"
    _gone_within(marker, 5.0)
    handled = "handled twice" if "the same stop" in output else "handled once"
    return f"{what}: {handled}, {summary['opt_steps']} opt steps"


# Without the debounce (5e531d8) the second of two signals stopped the run at once: the old code
# failed at its second run (the first gapped one), and 1 back-to-back pair in 5 (two signals that
# close are mostly handled as one). A gapped pair is two signals but under ~10 ms (5% of the gaps)
# may be handled as one: 5 runs of each kind miss that bug with probability < 0.8^5 x 0.1^5, ~3e-6.
RUNS_OF_TWO_SIGNALS = 10
TWO_SIGNALS_MAX_GAP = 0.2  # seconds; the debounce is 0.5 s: room for a loaded machine's delays


@pytest.mark.slow
def test_sigint_to_border_and_its_group_at_once_is_one_graceful_stop(tmp_path):
    """10 runs, 2 at a time, half back to back, half apart: every one exits 130 after a graceful
    stop, its final checkpoint at the summary's opt steps, no process left."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        lines = list(
            pool.map(lambda i: _one_stop_on_two_signals(tmp_path, i), range(RUNS_OF_TWO_SIGNALS))
        )
    print("\n".join(lines))
