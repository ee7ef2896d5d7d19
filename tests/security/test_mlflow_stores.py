"""The MLflow recorder's own store, beyond a planted ``mlflow.db`` (``test_recorder_stores.py``):
what is sent is checked again where it is sent, a store is found by its resolved path, a moved
run says so, a store another job holds locked is waited for, MLflow's own ``Default`` experiment
is refused in one line, and a resume whose store is not border's own says why in one line. Every
sink is an HTTP server on 127.0.0.1 that must receive nothing."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from border_py.cli.train import check_overrides
from border_py.errors import ConfigError
from border_py.recorders.mlflow_store import Found, inspect

from ..conftest import run_border
from .crafted import TINY, copy_run
from .sink import CREDENTIALS, Requests, plant_store, serving

pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")

NOT_OWN = "not border's own MLflow store"


@pytest.fixture
def sink() -> Iterator[tuple[str, Requests]]:
    """See :func:`.sink.serving`."""
    with serving() as served:
        yield served


def record(run_dir: Path, resume_step: int | None = None, **kwargs: str):
    """Open an MLflow recorder on ``run_dir`` (a resume at ``resume_step``), log one scalar and
    close it; return it."""
    from border_py.recorders.mlflow import MlflowRecorder

    recorder = MlflowRecorder(**kwargs)
    recorder.open(run_dir, {"seed": 0}, resume_step)
    recorder.scalars({"x": 1.0}, (resume_step or 0) + 100)
    recorder.close("completed")
    return recorder


def warnings_of(caplog) -> list[str]:
    """The warning lines border logged."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("border_py")
    ]


def saved(run_dir: Path) -> dict[str, str]:
    return json.loads((run_dir / "mlflow_run.json").read_text())


def test_mlflows_own_default_experiment_is_refused_in_one_line_for_borders_store():
    """MLflow makes ``Default`` in every store with its artifacts in ``mlruns/`` of the working
    dir: border's own store never records there. A store the command names is the user's."""
    with pytest.raises(ConfigError) as refused:
        check_overrides(["recorder=mlflow", "recorder.mlflow.experiment_name=Default"])
    line = str(refused.value)
    assert line.startswith("recorder.mlflow.experiment_name='Default': must be another name")
    assert "\n" not in line and "recorder.mlflow.tracking_uri=" in line
    check_overrides(
        [
            "recorder=mlflow",
            "recorder.mlflow.experiment_name=Default",
            "recorder.mlflow.tracking_uri=sqlite:///elsewhere/mlflow.db",
        ]
    )


@pytest.mark.slow  # MLflow creates its tables in seconds
def test_a_rewrite_of_the_artifact_uri_after_the_inspection_sends_nothing(tmp_path, sink, caplog):
    """A trigger in border's own store rewrites the run's artifact URI to the sink when MLflow
    reopens the run (after border read the store): the check where the artifacts are sent
    refuses them in one line, and the sink gets nothing."""
    from mlflow.tracking._tracking_service.utils import (
        _artifact_repos_cache as artifact_repos_cache,
    )

    url, got = sink
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run_id = record(run_dir).run_id
    artifact_repos_cache.clear()  # the resume is a process of its own: MLflow knows no repo yet
    with sqlite3.connect(run_dir / "mlflow.db") as db:
        db.execute(
            "CREATE TRIGGER rewrite AFTER UPDATE OF status ON runs BEGIN UPDATE runs SET"
            f" artifact_uri = '{url}' WHERE run_uuid = NEW.run_uuid; END"
        )
    record(run_dir, resume_step=100)
    assert saved(run_dir)["run_id"] == run_id  # reopened: the store was border's own
    assert got == []
    (line,) = [w for w in warnings_of(caplog) if "artifacts were not logged" in w]
    assert f"its run keeps artifacts at {url}" in line


@pytest.mark.slow  # MLflow creates its tables in seconds
def test_a_sweep_job_resumed_through_a_symlinked_path_continues_in_its_sweeps_store(
    tmp_path, monkeypatch, caplog
):
    """The store is named by its resolved path; ``/scratch -> /lustre``: the job resumed
    outside the multirun, by the link's path, continues its MLflow run in its sweep's store."""
    import border_py.recorders.mlflow

    real, link = tmp_path / "lustre", tmp_path / "scratch"
    (real / "sweep" / "0").mkdir(parents=True)
    link.symlink_to(real)
    with monkeypatch.context() as patch:  # as in the multirun: the sweep dir's store
        patch.setattr(border_py.recorders.mlflow, "default_store", lambda d: real / "sweep")
        run_id = record(real / "sweep" / "0").run_id
    record(link / "sweep" / "0", resume_step=100)
    assert saved(real / "sweep" / "0") == {
        "tracking_uri": f"sqlite:///{real / 'sweep' / 'mlflow.db'}",
        "run_id": run_id,
    }
    assert not list((real / "sweep" / "0").glob("mlflow*.db"))
    assert warnings_of(caplog) == []


@pytest.mark.slow  # MLflow creates its tables in seconds
def test_a_moved_run_says_so_in_one_line(tmp_path, caplog):
    """A run moved (or copied) elsewhere: its store keeps the artifacts under the old dir, so it
    is not used; one line says the run was moved, and where it records now."""
    first, moved = tmp_path / "a" / "run", tmp_path / "b" / "run"
    first.mkdir(parents=True)
    record(first)
    moved.parent.mkdir()
    first.rename(moved)
    record(moved, resume_step=100)
    (line,) = warnings_of(caplog)
    assert line.startswith(
        f"{moved / 'mlflow_run.json'} names the MLflow store in {first}: the run was moved or"
        " copied from there; "
    )
    assert f"{moved / 'mlflow.db'}: {NOT_OWN}" in line
    assert line.endswith(f"recording to a new MLflow run in sqlite:///{moved / 'mlflow-2.db'}")
    assert not first.exists()


@pytest.mark.slow  # MLflow creates its tables in seconds
@pytest.mark.parametrize("where", ["run", "parent"])
def test_a_named_store_that_is_not_borders_own_gets_nothing_and_one_line(
    tmp_path, sink, caplog, monkeypatch, where
):
    """``mlflow_run.json`` names a store border would reopen (``mlflow-2.db`` of the run dir, or
    ``mlflow.db`` of its parent: a sweep job's), planted: nothing is sent there, and one line
    (not one for each store left alone) says where the run records."""
    url, got = sink
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    sweep = tmp_path / "sweep"
    run_dir = sweep / "0"
    run_dir.mkdir(parents=True)
    named = run_dir / "mlflow-2.db" if where == "run" else sweep / "mlflow.db"
    planted_run = plant_store(named.parent, url, named.name)
    plant_store(run_dir, url)  # and the run dir's mlflow.db: not border's own either
    (run_dir / "mlflow_run.json").write_text(
        json.dumps({"tracking_uri": f"sqlite:///{named}", "run_id": planted_run})
    )
    planted = named.read_bytes()
    record(run_dir, resume_step=100)
    assert got == [] and named.read_bytes() == planted
    free = "mlflow-3.db" if where == "run" else "mlflow-2.db"
    assert saved(run_dir)["tracking_uri"] == f"sqlite:///{run_dir / free}"
    (line,) = warnings_of(caplog)
    assert line.startswith(f"{named}: {NOT_OWN} of this run (it keeps artifacts at {url})")
    assert f"{run_dir / 'mlflow.db'}: {NOT_OWN} (it keeps artifacts at {url}" in line


@pytest.mark.slow  # waits out a lock longer than sqlite3's default timeout (5 s)
def test_a_store_another_job_holds_locked_is_waited_for_not_judged_foreign(tmp_path):
    """A sweep's first job creating the store's tables holds its write lock for seconds: the
    next job waits, and finds border's own store (not one to record beside)."""
    roots = (tmp_path / "mlartifacts",)
    store = tmp_path / "mlflow.db"
    writer = sqlite3.connect(store, check_same_thread=False, isolation_level=None)
    writer.execute("CREATE TABLE experiments (name TEXT, artifact_location TEXT)")
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("INSERT INTO experiments VALUES ('border-py', ?)", (roots[0].as_uri(),))
    release = threading.Timer(6, lambda: writer.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    try:
        assert inspect(store, "border-py", None, roots) == Found(None)
    finally:
        release.join()
        writer.close()
    assert time.monotonic() - started >= 5


@pytest.mark.slow
def test_resume_auto_of_a_sweep_whose_store_is_planted_sends_nothing(tmp_path, sink):
    """A received sweep dir: its jobs continue with ``resume=auto``, its ``mlflow.db`` is not
    border's own. The jobs record to ``mlflow-2.db`` beside it; the sink gets nothing."""
    url, got = sink
    source = tmp_path / "source"
    out = run_border(["train", *TINY, "recorder=mlflow", f"run_dir={source}"], tmp_path)
    assert out.returncode == 0, out.stderr
    sweep = tmp_path / "sweep"
    job = copy_run(source, sweep / "0")
    for name in ("mlflow.db", "result.json"):
        (job / name).unlink()
    planted_run = plant_store(sweep, url)
    (job / "mlflow_run.json").write_text(
        json.dumps({"tracking_uri": f"sqlite:///{sweep / 'mlflow.db'}", "run_id": planted_run})
    )
    planted = (sweep / "mlflow.db").read_bytes()
    args = ["train", "-m", "seed=0", *TINY, "recorder=mlflow", "resume=auto"]
    args += [f"hydra.sweep.dir={sweep}", "trainer.max_opts=400"]
    out = run_border(args, tmp_path, env=CREDENTIALS)
    assert out.returncode == 0, out.stderr
    assert got == [] and (sweep / "mlflow.db").read_bytes() == planted
    assert saved(job)["tracking_uri"] == f"sqlite:///{sweep / 'mlflow-2.db'}"
    assert f"{sweep / 'mlflow.db'}: {NOT_OWN}" in out.stderr
