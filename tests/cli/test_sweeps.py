"""Sweeps and the user's view: multirun, failing jobs, `border report`, HPARAMS, console, MLflow."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import time
import uuid

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from border_py import train
from border_py.cli.hydra_callbacks import sweep_summary

from ..conftest import (
    BORDER,
    REPO,
    TINY,
    make_config,
    processes_with_marker,
    run_border,
    run_borders,
    scalar_tags,
)


def _sweep_dir(tmp_path):
    (sweep,) = (tmp_path / "outputs" / "multirun").glob("*/*")
    return sweep


def _hparams(run_dir) -> tuple[dict, list[str]]:
    """The run's HPARAMS session-start values and its session-end statuses."""
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    content = acc.PluginTagToContent("hparams")
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    values = {}
    for key, value in start.session_start_info.hparams.items():
        kind = value.WhichOneof("kind")
        values[key] = getattr(value, kind)
    ends = [
        plugin_data_pb2.HParamsPluginData.FromString(c).session_end_info.status
        for tag, c in content.items()
        if tag == "_hparams_/session_end_info"
    ]
    return values, ends


@pytest.mark.slow
def test_a_2x2_multirun_runs_four_async_jobs_and_leaves_no_process(tmp_path):
    marker = uuid.uuid4().hex
    out = run_border(
        ["train", "-m", "experiment=none", "seed=0,1", "agent.lr=1e-3,3e-4", *TINY],
        tmp_path,
        env={"BORDER_TEST_MARKER": marker},
        timeout=400,
    )
    assert out.returncode == 0, out.stderr
    sweep = _sweep_dir(tmp_path)
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir())
    assert [j.name for j in jobs] == ["0", "1", "2", "3"]
    seen = set()
    for job in jobs:
        result = json.loads((job / "result.json").read_text())
        assert result["status"] == "completed"
        summary = result["summary"]
        assert summary["opt_steps"] == 300
        assert summary["objective"] == summary["best_return"]  # objective=best by default
        assert summary["accounting"]["sent"] == summary["accounting"]["received"]
        log = (job / "train.log").read_text()
        assert (
            "started 2 actors" in log and "transitions this session: sent" in log
        )  # async, torn down
        hparams, ends = _hparams(job)
        seen.add((hparams["seed"], hparams["agent.lr"]))
        assert hparams["trainer._target_"].endswith("AsyncSettings")
        assert ends == [1]  # STATUS_SUCCESS
        assert "hparams/best_return" in scalar_tags(job)
    assert seen == {(0.0, 1e-3), (0.0, 3e-4), (1.0, 1e-3), (1.0, 3e-4)}
    assert not processes_with_marker(marker)  # no orphan survived, re-parented or not


def test_the_sweep_summary_counts_each_outcome_and_names_the_report_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = tmp_path / "outputs" / "multirun" / "2026-01-01" / "10-00-00"
    assert sweep_summary(["completed", "failed", None, "interrupted"], sweep) == (
        "4 jobs, 1 completed, 2 failed, 1 interrupted;"  # None: a job that left no result.json
        " compare them: border report outputs/multirun/2026-01-01/10-00-00"
    )
    elsewhere = tmp_path.parent / "a sweep"  # outside the working dir: absolute, shell-quoted
    assert sweep_summary(["completed"], elsewhere) == (
        f"1 job, 1 completed, 0 failed; compare them: border report '{elsewhere.resolve()}'"
    )


@pytest.mark.slow
def test_a_failing_job_is_recorded_the_sweep_goes_on_and_report_shows_it(tmp_path):
    out = run_border(
        [
            "train",
            "-m",
            "trainer=serial",
            "env=gym",
            "env.id=tests.crash_env:CrashAfter-v0,CartPole-v1",
            *TINY,
        ],
        tmp_path,
        # the repo (tests.crash_env) and the caller's (a worktree's src/ before the install)
        env={
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        },
    )
    assert out.returncode == 1
    sweep = _sweep_dir(tmp_path)
    *_, error, summary = out.stderr.strip().splitlines()
    assert error.startswith("border: error: 1 of 2 sweep jobs failed") and str(sweep / "0") in error
    # the last line counts the jobs and names the command that compares them (the sweep dir as
    # it is from the working dir)
    relative = sweep.relative_to(tmp_path)
    assert (
        summary == f"border: 2 jobs, 1 completed, 1 failed; compare them: border report {relative}"
    )
    failed = json.loads((sweep / "0" / "result.json").read_text())
    assert failed["status"] == "failed"
    assert failed["error"]["type"] == "RuntimeError"
    assert failed["error"]["message"] == "injected crash"
    assert "crash_env.py" in failed["error"]["traceback"]
    assert json.loads((sweep / "1" / "result.json").read_text())["status"] == "completed"
    assert _hparams(sweep / "0")[1] == [2]  # STATUS_FAILURE in TensorBoard too

    wide = {"COLUMNS": "120"}  # the run column keeps the crash env's id on one line
    report = run_border(
        ["report", str(sweep), "--csv", str(tmp_path / "r.csv")], tmp_path, env=wide
    )
    assert report.returncode == 0, report.stderr
    run_cells = [line.split("│")[1].strip() for line in report.stdout.splitlines() if "│" in line]
    assert run_cells[:3] == ["0", "env.id=tests.crash_env\\:CrashAfter-v0", "failed"]
    assert run_cells[3:6] == ["1", "env.id=CartPole-v1", "completed"]
    shown = " ".join(report.stdout.split())  # the caption is wrapped
    assert "every run: trainer=serial env=gym debug=tiny agent.hidden_sizes=[16]" in shown
    assert "0 failed: RuntimeError: injected crash" in report.stdout
    png = sweep / "report.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert [r["status"] for r in rows] == ["failed", "completed"]
    completed = json.loads((sweep / "1" / "result.json").read_text())["summary"]
    assert float(rows[1]["best_return"]) == completed["best_return"]
    assert int(rows[1]["opt_steps"]) == 300 and int(rows[1]["env_steps"]) == completed["env_steps"]


@pytest.mark.slow
def test_report_on_a_missing_or_empty_dir_is_one_line(tmp_path):
    paths = (tmp_path / "nope", tmp_path)
    for out in run_borders([["report", str(path)] for path in paths], tmp_path):
        assert out.returncode == 2
        assert len(out.stderr.strip().splitlines()) == 1 and "border: error:" in out.stderr


def test_objective_picks_what_train_returns(tmp_path):
    summary = train(make_config(tmp_path, "trainer=serial", "objective=mean", *TINY))
    evals = [v for _, v in scalar_tags(tmp_path / "run")["eval/return_mean"]]
    assert len(evals) == 2
    assert summary["objective"] == pytest.approx(sum(evals) / 2, rel=1e-6)
    assert summary["final_return"] == pytest.approx(evals[-1], rel=1e-6)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert (
        result["status"] == "completed" and result["summary"]["objective"] == summary["objective"]
    )


@pytest.mark.slow
def test_non_tty_console_prints_plain_progress_lines(tmp_path):
    # 1500 opt steps: a few seconds, several of the view's refreshes (TINY's 300 take half of one)
    longer = [*TINY, "trainer.max_opts=1500", "trainer.eval_interval=750"]
    shown = run_border(["train", "trainer=serial", "progress_interval=0.2", *longer], tmp_path)
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stderr.splitlines() if "progress: opt steps" in line]
    assert lines, shown.stderr
    rate = r"[\d.]+k?"  # 1.1k opt steps/s on a fast machine
    count = r"progress: opt steps \d+/1500 \(\d+%\)"  # the budget is max_opts: it counts opt steps
    stats = rf"{rate} opt steps/s \| (eval .* \| )?{rate} env steps/s \| buffer \d+%"
    assert re.search(rf"{count} \| {stats}", lines[-1]), lines[-1]  # the serial trainer: no actors
    assert "samples/s" not in shown.stderr  # it has no samples either
    assert "\x1b[" not in shown.stderr  # no terminal escapes in a log
    (run_dir,) = (tmp_path / "outputs").glob("*/*")
    assert "progress: opt steps" in (run_dir / "train.log").read_text()  # and in Hydra's log file
    quiet = run_border(["train", "trainer=serial", "progress=false", *TINY], tmp_path)
    assert quiet.returncode == 0 and "progress: " not in quiet.stderr


@pytest.mark.slow
def test_mlflow_recorder_writes_a_local_run_that_a_resume_continues(tmp_path):
    pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")
    from mlflow.tracking import MlflowClient

    base = ["trainer=serial", "recorder=both", *TINY]
    train(make_config(tmp_path, *base))
    run_dir = tmp_path / "run"
    ids = json.loads((run_dir / "mlflow_run.json").read_text())
    client = MlflowClient(tracking_uri=ids["tracking_uri"])
    assert ids["tracking_uri"] == f"sqlite:///{run_dir / 'mlflow.db'}"
    run = client.get_run(ids["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["agent.lr"] == "0.0023" and run.data.params["seed"] == "0"
    history = client.get_metric_history(ids["run_id"], "eval/return_mean")
    assert [m.step for m in history] == [150, 300]
    assert "hparams/best_return" in run.data.metrics
    assert "eval/return_mean" in scalar_tags(run_dir)  # TensorBoard too (recorder=both)

    train(make_config(tmp_path, "resume=" + str(run_dir)), overrides=["trainer.max_opts=450"])
    assert json.loads((run_dir / "mlflow_run.json").read_text())["run_id"] == ids["run_id"]
    history = client.get_metric_history(ids["run_id"], "eval/return_mean")
    assert [m.step for m in history] == [150, 300, 450]
    assert client.get_run(ids["run_id"]).info.status == "FINISHED"


@pytest.mark.slow
def test_ctrl_c_stops_the_running_job_gracefully_and_ends_the_sweep(tmp_path):
    marker = uuid.uuid4().hex
    proc = subprocess.Popen(
        [
            *BORDER,
            "train",
            "-m",
            "experiment=none",  # no looked-up recipe: it stops at 475
            "seed=0,1",
            "trainer.max_opts=1000000",
            "agent.hidden_sizes=[16]",
            "progress_interval=0.5",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "BORDER_TEST_MARKER": marker},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # wait until job 0 is optimizing
            logs = list((tmp_path / "outputs").glob("multirun/*/*/0/train.log"))
            if logs and re.search(r"progress: opt steps [1-9]", logs[0].read_text()):
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, output
    sweep = _sweep_dir(tmp_path)
    result = json.loads((sweep / "0" / "result.json").read_text())
    assert result["status"] == "interrupted" and result["summary"]["opt_steps"] > 0
    assert not (sweep / "1").exists()  # the sweep ended with the interrupted job
    assert not processes_with_marker(marker)


@pytest.mark.slow
def test_mlflow_resume_continues_in_the_store_the_run_started_in(tmp_path):
    pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")
    from mlflow.tracking import MlflowClient

    from border_py.recorders.mlflow import MlflowRecorder

    run_dir, store = tmp_path / "sweep" / "0", tmp_path / "sweep"
    run_dir.mkdir(parents=True)
    uri = f"sqlite:///{store / 'mlflow.db'}"  # a sweep's shared store, the job resumed alone
    first = MlflowRecorder(tracking_uri=uri)
    first.open(run_dir, {"seed": 0}, None)
    first.scalars({"x": 1.0}, 1)
    first.close("interrupted")
    again = MlflowRecorder()  # by default it would pick <run dir>/mlflow.db
    again.open(run_dir, {"seed": 0}, resume_step=1)
    again.scalars({"x": 2.0}, 2)
    again.close("completed", {"hparams/best_return": 2.0})
    client = MlflowClient(tracking_uri=uri)
    assert [m.value for m in client.get_metric_history(first.run_id, "x")] == [1.0, 2.0]
    assert client.get_run(first.run_id).info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(first.run_id, "hparams/best_return")] == [2]
    assert not (run_dir / "mlflow.db").exists()


def test_a_recorder_that_cannot_open_fails_the_run_cleanly(tmp_path):
    pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")
    bad = "recorder.mlflow.tracking_uri=sqlite:////proc/no/such/dir/mlflow.db"
    with pytest.raises(Exception):  # noqa: B017 (MLflow's own error type)
        train(make_config(tmp_path, "trainer=serial", "recorder=both", bad, *TINY))
    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "result.json").read_text())["status"] == "failed"
    assert _hparams(run_dir)[1] == [2]  # TensorBoard, opened first, was closed as failed
