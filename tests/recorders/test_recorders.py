"""Recorders: combined recorders, W&B offline, MLflow artifacts, TensorBoard's HPARAMS view."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from border_py import train
from border_py.cli.train import check_overrides
from border_py.errors import ConfigError
from border_py.recorders import Recorders, TensorBoardRecorder
from border_py.recorders.composite import build_recorders

from ..conftest import make_config, scalar_tags

SERIAL = ("trainer=serial", "progress=false")  # in-process runs at the tiny_config budget


def test_recorder_options_compose_into_one_recorder_per_name(tmp_path):
    default = make_config(tmp_path).recorder
    assert list(default) == ["tensorboard"]
    both = make_config(tmp_path, "recorder=both").recorder
    assert list(both) == ["tensorboard", "mlflow"]
    listed = make_config(tmp_path, "recorder=[tensorboard,wandb]", "recorder.wandb.mode=offline")
    assert list(listed.recorder) == ["tensorboard", "wandb"]
    recorder = build_recorders(dict(listed.recorder))
    assert isinstance(recorder, Recorders)
    assert [type(m).__name__ for m in recorder.members] == ["TensorBoardRecorder", "WandbRecorder"]
    saved_before = {"_target_": "border_py.recorders.TensorBoardRecorder", "flush_secs": 5}
    assert isinstance(build_recorders(saved_before), TensorBoardRecorder)
    assert isinstance(build_recorders(None), Recorders)  # configs without the group: TensorBoard


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["recorder=wandb", "recorder.wandb.mode=cloud"], "recorder.wandb.mode='cloud': must be"),
        (["recorder=wandb", "recorder.wandb.project="], "recorder.wandb.project='': must be"),
        (
            ["recorder=wandb", "recorder.wandb.tags=[1]"],
            "recorder.wandb.tags=[1]: must be a list of strings",
        ),
        (
            ["recorder=both", "recorder.mlflow.experiment_name="],
            "recorder.mlflow.experiment_name='': must be a non-empty string",
        ),
    ],
)
def test_bad_recorder_keys_are_one_line(overrides, expected):
    with pytest.raises(ConfigError) as err:
        check_overrides(overrides)
    assert expected in str(err.value) and "\n" not in str(err.value)


# --- W&B ----------------------------------------------------------------------------------------


@pytest.fixture
def wandb_offline(monkeypatch):
    """W&B without an account; its per-process service is stopped after the test."""
    wandb = pytest.importorskip("wandb", reason="the [wandb] extra is not installed")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    yield
    wandb.teardown()


def wandb_records(path: Path) -> Iterator[object]:
    """The records of an offline W&B run file (``run-<id>.wandb``): a ``:W&B`` header, then
    LevelDB-log records (32 KiB blocks, 7-byte record headers) holding ``Record`` protobufs."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, pending = 32768, 7, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk  # FULL/FIRST start a record
        if kind in (1, 4):  # FULL/LAST end it
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def offline_run(run_file: Path) -> dict:
    """What an offline W&B run holds: id, config, history rows, summary, exit code."""
    out: dict = {"history": [], "summary": {}, "config": {}, "exit_code": None}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out["id"] = record.run.run_id
            out["config"] = {u.key: json.loads(u.value_json) for u in record.run.config.update}
        elif kind == "history":
            row = {}
            for item in record.history.item:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                row[key] = json.loads(item.value_json)
            out["history"].append(row)
        elif kind == "summary":
            for item in record.summary.update:
                key = "/".join(item.nested_key) if item.nested_key else item.key
                out["summary"][key] = json.loads(item.value_json)
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    return out


def _evals(run: dict) -> list[tuple[int, float]]:
    return [
        (r["opt_step"], r["eval/return_mean"]) for r in run["history"] if "eval/return_mean" in r
    ]


@pytest.mark.slow
def test_wandb_offline_run_has_the_scalars_and_a_resume_continues_the_same_run(
    tmp_path, tiny_config, wandb_offline
):
    train(tiny_config(*SERIAL, "recorder=[tensorboard,wandb]"))
    run_dir = tmp_path / "run"
    run_id = json.loads((run_dir / "wandb_run.json").read_text())["id"]
    (first,) = (run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")
    run = offline_run(first)
    assert run["id"] == run_id
    tensorboard = scalar_tags(run_dir)
    assert _evals(run) == [
        (step, pytest.approx(value)) for step, value in tensorboard["eval/return_mean"]
    ]
    losses = [(r["opt_step"], r["train/loss"]) for r in run["history"] if "train/loss" in r]
    assert (
        [s for s, _ in losses]
        == [s for s, _ in tensorboard["train/loss"]]
        == [50, 100, 150, 200, 250, 300]
    )
    assert run["config"]["agent"]["hidden_sizes"] == [16] and run["config"]["seed"] == 0
    assert "run_dir" not in run["config"]  # where, not what, is trained
    result = json.loads((run_dir / "result.json").read_text())["summary"]
    assert run["summary"]["hparams/best_return"] == result["best_return"]
    assert run["summary"]["status"] == "completed" and run["exit_code"] == 0

    train(make_config(tmp_path, "resume=" + str(run_dir)), overrides=["trainer.max_opts=450"])
    assert json.loads((run_dir / "wandb_run.json").read_text())["id"] == run_id
    files = sorted((run_dir / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert (
        len(files) == 2
    )  # one file per session, both of the same W&B run (`wandb sync` joins them)
    resumed = offline_run(next(f for f in files if f != first))
    assert resumed["id"] == run_id
    assert [step for step, _ in _evals(resumed)] == [450]
    assert resumed["config"]["trainer"]["max_opts"] == 450


def test_wandb_failing_to_start_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="the [wandb] extra is not installed")
    from border_py.errors import RunError
    from border_py.recorders.wandb import WandbRecorder

    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "no_login"))
    monkeypatch.setenv("NETRC", str(tmp_path / "no_netrc"))
    recorder = WandbRecorder()
    with pytest.raises(RunError) as err:
        recorder.open(tmp_path, {"seed": 0}, None)
    assert str(err.value).startswith("recorder.wandb: W&B did not start (")
    assert "WANDB_MODE=offline" in str(err.value) and "\n" not in str(err.value)
    recorder.close("failed")  # nothing opened: nothing to do


# --- MLflow artifacts ---------------------------------------------------------------------------


@pytest.mark.slow
def test_mlflow_run_gets_the_best_policy_the_config_and_the_videos(tmp_path, tiny_config):
    pytest.importorskip("mlflow", reason="the [mlflow] extra is not installed")
    pytest.importorskip("moviepy", reason="the [video] extra is not installed")
    from mlflow.tracking import MlflowClient

    videos = tmp_path / "run" / "videos"
    record_video = (
        "{_target_:gymnasium.wrappers.RecordVideo,video_folder:'" + str(videos) + "',"
        "evaluation_only:true}"
    )
    summary = train(
        tiny_config(
            *SERIAL,
            "recorder=mlflow",
            "+env.kwargs.render_mode=rgb_array",
            f"env.wrappers=[{record_video}]",
        )
    )
    run_dir = tmp_path / "run"
    recorded = sorted(p.name for p in videos.glob("*.mp4"))
    assert recorded  # RecordVideo wrapped the evaluation env (episodes 0 and 1 at least)
    ids = json.loads((run_dir / "mlflow_run.json").read_text())
    client = MlflowClient(tracking_uri=ids["tracking_uri"])

    def listing(path: str | None = None) -> set[str]:
        return {f.path for f in client.list_artifacts(ids["run_id"], path)}

    assert {"best", "config.yaml", "videos"} <= listing()
    assert listing("best") == {"best/policy.pt", "best/meta.json"}
    assert listing("videos/videos") == {f"videos/videos/{name}" for name in recorded}
    local = Path(client.download_artifacts(ids["run_id"], "best/policy.pt", str(tmp_path / "dl")))
    saved = torch.load(local, weights_only=True)
    expected = torch.load(run_dir / "checkpoints" / "best" / "policy.pt", weights_only=True)
    assert saved.keys() == expected.keys()
    assert all(torch.equal(saved[k], expected[k]) for k in saved)
    meta = json.loads(
        Path(
            client.download_artifacts(ids["run_id"], "best/meta.json", str(tmp_path / "dl"))
        ).read_text()
    )
    assert meta["best_return"] == summary["best_return"]
    import yaml

    config = yaml.safe_load(
        Path(
            client.download_artifacts(ids["run_id"], "config.yaml", str(tmp_path / "dl"))
        ).read_text()
    )
    assert config["agent"]["hidden_sizes"] == [16] and config["trainer"]["max_opts"] == 300


# --- TensorBoard HPARAMS -------------------------------------------------------------------------


@pytest.mark.slow
def test_tensorboard_infers_the_hparams_experiment_of_a_sweep_from_its_runs(tmp_path, tiny_config):
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context

    for i, lr in enumerate(("1e-3", "3e-4")):
        cfg = tiny_config(*SERIAL, f"agent.lr={lr}", f"run_dir={tmp_path / str(i)}")
        train(cfg)
    mux = plugin_event_multiplexer.EventMultiplexer()
    mux.AddRunsFromDirectory(str(tmp_path))
    mux.Reload()
    provider = data_provider.MultiplexerDataProvider(mux, str(tmp_path))
    hparams = backend_context.Context(
        base_plugin.TBContext(logdir=str(tmp_path), data_provider=provider, multiplexer=mux)
    )
    request = context.RequestContext()
    experiment = hparams.experiment_from_metadata(
        request,
        "",
        True,
        hparams.hparams_metadata(request, ""),
        hparams.hparams_from_data_provider(request, "", 0),
    )
    infos = {info.name: info for info in experiment.hparam_infos}
    lr = infos["agent.lr"]  # the domain spans both runs (a per-run experiment would hide one)
    assert (lr.domain_interval.min_value, lr.domain_interval.max_value) == (3e-4, 1e-3)
    assert lr.differs and not infos["seed"].differs
    metrics = {m.name.tag for m in experiment.metric_infos}
    assert {"eval/return_mean", "hparams/best_return", "hparams/final_return"} <= metrics


def test_tensorboard_writes_each_record_as_one_event_of_every_scalar(tmp_path):
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    recorder = TensorBoardRecorder()
    recorder.open(tmp_path, {"seed": 0}, resume_step=None)
    recorder.scalars({"loss": 1.0, "perf/rate": 2.5}, 3)
    recorder.scalars({"loss": 4.0, "perf/rate": 0.5}, 7)
    recorder.close()
    (path,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
    events = [e for e in LegacyEventFileLoader(str(path)).Load() if e.HasField("summary")]
    points = [
        (e.step, [(v.tag, v.simple_value) for v in e.summary.value])
        for e in events
        if all(v.HasField("simple_value") for v in e.summary.value)
    ]
    assert points == [
        (3, [("loss", 1.0), ("perf/rate", 2.5)]),
        (7, [("loss", 4.0), ("perf/rate", 0.5)]),
    ]
    assert scalar_tags(tmp_path) == {
        "loss": [(3, 1.0), (7, 4.0)],
        "perf/rate": [(3, 2.5), (7, 0.5)],
    }


def test_an_event_file_named_in_the_future_never_holds_up_a_resume(tmp_path, caplog):
    """A new event file waits for its name to sort last, but never on a crafted name's word (a
    stamp a year ahead made a resume sleep for a year)."""
    import time

    (tmp_path / "tensorboard").mkdir()
    ahead = int(time.time()) + 365 * 24 * 3600
    (tmp_path / "tensorboard" / f"events.out.tfevents.{ahead}.host.1.0").write_bytes(b"")
    recorder = TensorBoardRecorder()
    start = time.monotonic()
    recorder.open(tmp_path, {"seed": 0}, resume_step=10)
    recorder.close()
    assert time.monotonic() - start < 10
    assert "named 31536" in caplog.text and "in the future" in caplog.text
