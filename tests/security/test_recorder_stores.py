"""A recorder's store found in a dir chooses nothing: a planted ``mlflow.db`` whose experiment
keeps its artifacts at ``http://`` gets no request (and so never the user's MLflow credentials),
whether the run is resumed (``resume=<dir>``, ``resume=auto``) or fresh; a file under ``wandb/`` is
never uploaded, and a link there is refused; a fresh run refuses a dir another user can write in.
Every sink is an HTTP server on 127.0.0.1 (more: ``test_mlflow_stores.py``, W&B's settings:
``test_wandb_settings.py``)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from border_py import train
from border_py.errors import ConfigError
from border_py.recorders.mlflow_store import Found, inspect, local_under
from border_py.runs.links import refuse_links
from border_py.runs.run_dir import claim

from ..conftest import make_config, run_border
from .crafted import TINY, copy_run, tree
from .sink import CREDENTIALS, TOKEN, Requests, plant_store, serving

mlflow = pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")

MARKER = b"-----BEGIN OPENSSH PRIVATE KEY----- marker 4f1c2e\n"
REFUSED = "is a symbolic link; border never follows links"


@pytest.fixture
def sink() -> Iterator[tuple[str, Requests]]:
    """See :func:`.sink.serving`."""
    with serving() as served:
        yield served


def _one_line(out, exit_status: int = 2) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == exit_status and len(lines) == 1, out.stderr
    return lines[0]


def _nowhere(marker: bytes, *dirs: Path) -> None:
    for d in dirs:
        for path in d.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert marker not in path.read_bytes(), path


# --- the recorder, in the process ----------------------------------------------------------------


@pytest.mark.slow  # MLflow creates its tables in seconds
@pytest.mark.parametrize("named", [False, True], ids=["found", "named-by-mlflow_run.json"])
@pytest.mark.parametrize("resumed", [False, True], ids=["fresh", "resumed"])
def test_a_planted_store_gets_no_request_and_the_run_records_beside_it(
    tmp_path, sink, monkeypatch, caplog, resumed, named
):
    """The store is inspected, found to send artifacts to http://, left alone (byte-identical),
    and the run records to ``mlflow-2.db`` beside it, saying so in one line."""
    from border_py.recorders.mlflow import MlflowRecorder

    url, got = sink
    for key, value in CREDENTIALS.items():
        monkeypatch.setenv(key, value)
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints" / "best").mkdir(parents=True)
    (run_dir / "checkpoints" / "best" / "meta.json").write_text("{}")
    planted_run = plant_store(run_dir, url)
    if named:
        uri = f"sqlite:///{run_dir / 'mlflow.db'}"
        (run_dir / "mlflow_run.json").write_text(
            json.dumps({"tracking_uri": uri, "run_id": planted_run})
        )
    store = (run_dir / "mlflow.db").read_bytes()
    recorder = MlflowRecorder()
    recorder.open(run_dir, {"seed": 0}, 100 if resumed else None)
    recorder.scalars({"x": 1.0}, 200)
    recorder.close("completed", {"hparams/best_return": 1.0})
    assert got == []
    assert (run_dir / "mlflow.db").read_bytes() == store
    saved = json.loads((run_dir / "mlflow_run.json").read_text())
    assert saved["tracking_uri"] == f"sqlite:///{run_dir / 'mlflow-2.db'}"
    assert saved["run_id"] != planted_run
    assert list((run_dir / "mlartifacts").rglob("best/meta.json"))
    warned = [
        r.getMessage() for r in caplog.records if "not border's own MLflow store" in r.message
    ]
    assert len(warned) == 1 and url in warned[0], warned


@pytest.mark.slow  # MLflow creates its tables in seconds
def test_a_store_named_on_the_command_line_is_used_as_it_is(tmp_path, sink, monkeypatch):
    """``recorder.mlflow.tracking_uri=`` names the store: its experiment's artifact location is
    the user's choice (a remote artifact server, here the sink), so the artifacts go there."""
    from border_py.recorders.mlflow import MlflowRecorder

    url, got = sink
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    elsewhere = tmp_path / "stores"
    elsewhere.mkdir()
    plant_store(elsewhere, url)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    recorder = MlflowRecorder(tracking_uri=f"sqlite:///{elsewhere / 'mlflow.db'}")
    recorder.open(run_dir, {"seed": 0}, None)
    recorder.close("completed")
    assert got and all(h.get("Authorization") == f"Bearer {TOKEN}" for _, _, h, _ in got)
    assert any(path.endswith("/config.yaml") for _, path, _, _ in got)


@pytest.mark.slow  # MLflow creates its tables in seconds
def test_files_under_wandb_and_linked_videos_are_never_read(tmp_path, caplog):
    """A regular ``wandb/clip.mp4`` stays out of the artifacts, and a ``.mp4`` link (made while
    the run trained, after the run dir was checked) is left out in one line, never opened."""
    from border_py.recorders.mlflow import MlflowRecorder

    secret = tmp_path / "id_rsa"
    secret.write_bytes(MARKER)
    run_dir = tmp_path / "run"
    (run_dir / "wandb").mkdir(parents=True)
    (run_dir / "wandb" / "clip.mp4").write_bytes(MARKER)
    (run_dir / "videos").mkdir()
    (run_dir / "videos" / "episode-0.mp4").write_bytes(b"a video border recorded")
    (run_dir / "videos" / "clip.mp4").symlink_to(secret)
    recorder = MlflowRecorder()
    recorder.open(run_dir, {"seed": 0}, None)
    recorder.close("completed")
    artifacts = run_dir / "mlartifacts"
    assert [p.name for p in artifacts.rglob("*.mp4")] == ["episode-0.mp4"]
    _nowhere(MARKER, artifacts)
    left_out = [r.getMessage() for r in caplog.records if "left out" in r.message]
    assert left_out == [
        f"MLflow: {run_dir / 'videos' / 'clip.mp4'} left out of the run's artifacts"
        " (Too many levels of symbolic links)"
    ], left_out


@pytest.mark.slow  # MLflow creates its tables in seconds
def test_a_linked_artifact_dir_is_never_written_through(tmp_path, caplog):
    """``mlartifacts`` linked elsewhere (a sweep's, made after its dir was checked): the
    artifacts are not logged (one line) and the link's target stays empty."""
    from border_py.recorders.mlflow import MlflowRecorder

    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    run_dir.mkdir()
    outside.mkdir()
    recorder = MlflowRecorder()
    recorder.open(run_dir, {"seed": 0}, None)
    (run_dir / "mlartifacts").symlink_to(outside)
    recorder.close("completed")
    assert list(outside.iterdir()) == []
    warned = [r.getMessage() for r in caplog.records if "not logged" in r.message]
    assert len(warned) == 1 and REFUSED in warned[0], warned


@pytest.mark.slow  # MLflow creates its tables in seconds
def test_the_store_a_saved_mlflow_run_json_names_is_logged_escaped(tmp_path, caplog):
    from border_py.recorders.mlflow import MlflowRecorder

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    named = "sqlite:///x\x1b]0;PWNED\x07\x1b[2J"
    (run_dir / "mlflow_run.json").write_text(json.dumps({"tracking_uri": named, "run_id": "r"}))
    recorder = MlflowRecorder()
    recorder.open(run_dir, {"seed": 0}, 100)
    recorder.close("completed")
    (line,) = [r.getMessage() for r in caplog.records if "names the store" in r.getMessage()]
    assert "\x1b" not in line and "\\x1b]0;PWNED\\x07\\x1b[2J" in line, line


@pytest.mark.parametrize(
    ("uri", "own"),
    [
        ("file:///r/mlartifacts", True),
        ("file:///r/mlartifacts/4f2a/artifacts", True),
        ("file://localhost/s/mlartifacts/1", True),
        ("file:///r/mlartifacts/../../home/u/.ssh", False),
        ("file:///r/mlartifacts/%2e%2e/x", False),
        ("file:///r/mlartifactsx", False),
        ("file:///r", False),
        ("file://evil.example/r/mlartifacts", False),
        ("file:///r/mlartifacts?x=1", False),
        ("/r/mlartifacts", False),
        ("mlartifacts", False),
        ("http://127.0.0.1:1/r/mlartifacts", False),
        ("s3://bucket/r/mlartifacts", False),
    ],
)
def test_only_file_uris_under_border_s_artifact_dirs_are_its_own(uri, own):
    assert local_under(uri, (Path("/r/mlartifacts"), Path("/s/mlartifacts"))) is own


def test_a_store_is_read_without_mlflow_and_judged_by_where_it_sends_artifacts(tmp_path):
    roots = (tmp_path / "mlartifacts",)
    store = tmp_path / "mlflow.db"
    assert inspect(store, "border-py", None, roots) == Found(None)  # none yet
    store.write_bytes(b"")
    assert inspect(store, "border-py", None, roots) == Found(None)  # no tables yet
    with sqlite3.connect(store) as db:
        db.execute("CREATE TABLE experiments (name TEXT, artifact_location TEXT)")
        db.execute("CREATE TABLE runs (run_uuid TEXT, artifact_uri TEXT)")
        db.execute("INSERT INTO experiments VALUES ('border-py', ?)", (roots[0].as_uri(),))
        db.execute("INSERT INTO runs VALUES ('r1', ?), ('r2', 'http://x/y')", (roots[0].as_uri(),))
    before = store.read_bytes()
    assert inspect(store, "border-py", "r1", roots) == Found(None, has_run=True)
    assert inspect(store, "border-py", "r2", roots) == Found(
        "it keeps artifacts at http://x/y", True
    )
    assert inspect(store, "border-py", "r3", roots) == Found(None, has_run=False)
    assert inspect(store, "other", None, roots) == Found(None)
    assert store.read_bytes() == before
    link, junk = tmp_path / "link.db", tmp_path / "junk.db"
    link.symlink_to(store)
    junk.write_bytes(b"not a database" * 100)
    assert inspect(link, "border-py", None, roots) == Found("it is a symbolic link")
    assert inspect(junk, "border-py", None, roots).foreign.startswith("it is not an MLflow store")


# --- links and shared dirs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "link",
    ["wandb", "wandb/clip.mp4", "wandb/offline-run-1/files/config.yaml", "wandb/x/latest-run"],
)
def test_a_link_in_or_at_wandb_is_refused(tmp_path, link):
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    (run_dir / "wandb" / "offline-run-1" / "files").mkdir(parents=True)
    (run_dir / "wandb" / "x").mkdir()
    outside.mkdir()
    if link == "wandb":
        shutil.rmtree(run_dir / "wandb")
    (run_dir / link).symlink_to(outside)
    with pytest.raises(ConfigError, match=f"^{run_dir / link}: {REFUSED}"):
        refuse_links(run_dir)


def test_the_links_wandb_makes_itself_are_accepted(tmp_path):
    """W&B's own: ``latest-run`` and the logs at its top, each run's link to the core's log."""
    run_dir = tmp_path / "run"
    logs = run_dir / "wandb" / "offline-run-1" / "logs"
    logs.mkdir(parents=True)
    (logs / "debug.log").write_text("")
    (logs / "debug-core.log").symlink_to(tmp_path / "core-debug.log")
    for name, target in [
        ("latest-run", "offline-run-1"),
        ("debug.log", "offline-run-1/logs/debug.log"),
        ("debug-internal.log", "offline-run-1/logs/debug-internal.log"),
    ]:
        (run_dir / "wandb" / name).symlink_to(target)
    refuse_links(run_dir)


@pytest.mark.parametrize("found", ["mlflow.db", "mlartifacts", "wandb_run.json"])
def test_a_fresh_run_refuses_a_dir_holding_a_recorders_store(tmp_path, found):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / found).mkdir() if found == "mlartifacts" else (run_dir / found).write_text("{}")
    with pytest.raises(
        ConfigError, match=rf"^run_dir={run_dir}: holds {found}, which no border run"
    ):
        claim(run_dir)
    assert not (run_dir / ".border_run").exists()


def test_a_fresh_run_refuses_a_dir_another_user_can_write_in(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(
        ConfigError, match=rf"^run_dir={shared}: every user can write in it \(mode 1777\)"
    ):
        claim(shared)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    if os.geteuid() == 0:  # root can give it away: another user's dir, writable by root
        os.chown(theirs, 65534, 65534)
        with pytest.raises(ConfigError, match=rf"^run_dir={theirs}: owned by another user"):
            claim(theirs)
    assert not (shared / ".border_run").exists() and not (theirs / ".border_run").exists()


# --- end to end: border train --------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A tiny real serial run recorded to MLflow and TensorBoard (``recorder=both``)."""
    where = tmp_path_factory.mktemp("recorded")
    train(make_config(where, *TINY, "recorder=both"))
    return where / "run"


def crafted(recorded: Path, to: Path, url: str, status: str = "completed") -> Path:
    """A copy of ``recorded`` as someone else would hand it over: border's own files, its
    ``config.json`` byte-identical, but its MLflow store replaced by one whose artifacts go to
    ``url``, and ``result.json`` saying ``status``."""
    run = copy_run(recorded, to)
    for name in ("mlflow.db", "mlflow_run.json"):
        (run / name).unlink()
    shutil.rmtree(run / "mlartifacts")
    plant_store(run, url)
    result = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps(result | {"status": status}))
    return run


@pytest.mark.slow
@pytest.mark.parametrize("resume", ["dir", "auto"])
def test_resuming_a_run_with_a_planted_store_sends_nothing(recorded, tmp_path, sink, resume):
    url, got = sink
    run = crafted(recorded, tmp_path / "crafted", url, status="interrupted")
    planted = (run / "mlflow.db").read_bytes()
    how = [f"resume={run}"] if resume == "dir" else ["resume=auto", f"run_dir={run}"]
    out = run_border(["train", *how, "trainer.max_opts=400"], tmp_path, env=CREDENTIALS)
    assert out.returncode == 0, out.stderr
    assert got == []
    assert (run / "mlflow.db").read_bytes() == planted
    assert json.loads((run / "mlflow_run.json").read_text())["tracking_uri"].endswith(
        "/mlflow-2.db"
    )
    assert f"{run / 'mlflow.db'}: not border's own MLflow store" in out.stderr
    assert list((run / "mlartifacts").rglob("best/policy.pt"))


@pytest.mark.slow
def test_a_fresh_run_into_a_dir_with_a_planted_store_is_refused(tmp_path, sink):
    url, got = sink
    shared = tmp_path / "shared"
    shared.mkdir()
    plant_store(shared, url)
    args = ["train", *TINY, "recorder=mlflow", f"run_dir={shared}"]
    line = _one_line(run_border(args, tmp_path, env=CREDENTIALS))
    assert line == (
        f"border: error: run_dir={shared}: holds mlflow.db, which no border run of this dir wrote"
        " (no claim, no checkpoint) and which would choose where this run records; choose"
        " another dir"
    )
    shared.chmod(0o1777)
    (shared / "mlflow.db").unlink()
    line = _one_line(run_border(args, tmp_path, env=CREDENTIALS))
    assert line.startswith(
        f"border: error: run_dir={shared}: every user can write in it (mode 1777)"
    )
    assert got == [] and tree(shared) == {}  # nothing written, not even Hydra's log


@pytest.mark.slow
def test_a_linked_clip_under_wandb_is_refused_and_never_read(recorded, tmp_path, sink):
    url, got = sink
    secret = tmp_path / "id_rsa"
    secret.write_bytes(MARKER)
    run = crafted(recorded, tmp_path / "crafted", url, status="interrupted")
    (run / "wandb").mkdir()
    (run / "wandb" / "clip.mp4").symlink_to(secret)
    line = _one_line(run_border(["train", f"resume={run}", "trainer.max_opts=400"], tmp_path))
    assert (
        line == f"border: error: {run / 'wandb' / 'clip.mp4'}: {REFUSED} in a run, sweep or study"
        " dir (put the file or dir itself there, or remove the link)"
    )
    assert got == [] and secret.read_bytes() == MARKER
    _nowhere(MARKER, run)


@pytest.mark.slow
def test_a_wandb_link_at_the_top_is_refused_and_its_target_untouched(recorded, tmp_path):
    run = copy_run(recorded, tmp_path / "run")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "debug.log").write_text("the user's own\n")
    (elsewhere / "latest-run").write_text("the user's own\n")
    before = tree(elsewhere)
    (run / "wandb").symlink_to(elsewhere)
    args = ["train", f"resume={run}", "trainer.max_opts=400"]
    line = _one_line(run_border(args, tmp_path, env={"WANDB_MODE": "offline"}))
    assert line.startswith(f"border: error: {run / 'wandb'}: {REFUSED}")
    assert tree(elsewhere) == before


@pytest.mark.slow
def test_a_sweep_shares_its_own_store_and_refuses_a_planted_one(tmp_path, sink):
    """The jobs of a sweep record to the one store border made in the sweep dir (the second job
    finds the first one's store, and uses it); an explicit sweep dir that already holds a store is
    refused in one line before any job runs."""
    from mlflow.tracking import MlflowClient

    url, got = sink
    sweep = tmp_path / "sweep"
    args = ["train", "-m", "seed=0,1", *TINY, "recorder=mlflow", f"hydra.sweep.dir={sweep}"]
    out = run_border(args, tmp_path, env=CREDENTIALS)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in sweep.glob("mlflow*.db")) == ["mlflow.db"]
    client = MlflowClient(tracking_uri=f"sqlite:///{sweep / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("border-py")
    assert experiment.artifact_location == (sweep / "mlartifacts").as_uri()
    runs = client.search_runs([experiment.experiment_id])
    assert sorted(r.data.params["seed"] for r in runs) == ["0", "1"]
    for job in ("0", "1"):
        saved = json.loads((sweep / job / "mlflow_run.json").read_text())
        assert saved["tracking_uri"] == f"sqlite:///{sweep / 'mlflow.db'}"
    assert len(list((sweep / "mlartifacts").rglob("best/policy.pt"))) == 2

    planted = tmp_path / "planted"
    planted.mkdir()
    plant_store(planted, url)
    args = ["train", "-m", "seed=0,1", *TINY, "recorder=mlflow", f"hydra.sweep.dir={planted}"]
    line = _one_line(run_border(args, tmp_path, env=CREDENTIALS))
    assert line == (
        f"border: error: hydra.sweep.dir={planted}: holds an earlier sweep's mlflow.db; choose"
        " another dir, or continue its jobs with resume=auto"
    )
    assert got == [] and sorted(p.name for p in planted.iterdir()) == ["mlflow.db"]
