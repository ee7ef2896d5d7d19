"""Settings that protect the user come from the user: a resumed run's saved config never decides
which checks run (``check_resources``) or where its data goes (W&B's ``mode``, ``entity`` and
``project``, MLflow's ``tracking_uri``), whatever name the recorder is saved under; only a saved
W&B mode that keeps the data in (``offline``, ``disabled``) is kept, and the command line still
beats it."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import wandb

from border_py.errors import ConfigError
from border_py.recorders.composite import build_recorders
from border_py.trainers.train import prepare

from ..conftest import make_config
from ..test_resources import run_watched
from .crafted import copy_run

WANDB = "border_py.recorders.wandb.WandbRecorder"
MLFLOW = "border_py.recorders.mlflow.MlflowRecorder"
# a crafted run's W&B destination: online, to the attacker's entity and project
ATTACKER = {"_target_": WANDB, "mode": "online", "entity": "attacker", "project": "exfil"}
MLFLOW_STORE = {"_target_": MLFLOW, "tracking_uri": "http://127.0.0.1:9/exfil"}


def crafted(trained: Path, where: Path, **changes: Any) -> Path:
    """A copy of the tiny real run, as a preempted job leaves it, whose every checkpoint's
    config.json has the top-level ``changes``."""
    run = copy_run(trained, where / "run")
    (run / "result.json").unlink()
    for config_file in run.glob("checkpoints/*/config.json"):
        config = json.loads(config_file.read_text()) | changes
        config_file.write_text(json.dumps(config))
    return run


def huge_replay(trained: Path, where: Path) -> Path:
    """The crafted run of N3: ``check_resources: false`` and a replay buffer of 10^12 rows."""
    config = json.loads(next(trained.glob("checkpoints/best/config.json")).read_text())
    replay = config["replay_buffer"] | {"capacity": 10**12}
    return crafted(trained, where, check_resources=False, replay_buffer=replay)


def resume(tmp_path: Path, run: Path, *overrides: str):
    """What ``border train resume=<run> trainer.max_opts=400 <overrides>`` validates (nothing
    started): its plan. Keys the default config lacks are composed as ``border train`` composes
    them (``++key=value``, see :func:`border_py.cli.checks.check_overrides`)."""
    given = ["trainer.max_opts=400", *overrides]
    composed = [o if o.startswith(("trainer.", "check_")) else f"++{o}" for o in given]
    return prepare(make_config(tmp_path, f"resume={run}", *composed), overrides=given)


def test_a_saved_check_resources_false_is_not_carried_into_a_resume(trained, tmp_path, caplog):
    run = huge_replay(trained, tmp_path)
    with caplog.at_level(logging.WARNING), pytest.raises(ConfigError) as refused:
        resume(tmp_path, run)
    assert str(refused.value).startswith(
        "replay_buffer.capacity=1000000000000: the replay buffer needs ~43.7 TiB, more than the"
    )
    assert str(refused.value).endswith("(or check_resources=false to run anyway)")
    assert "the saved check_resources=False is not used" in caplog.text
    # the user's own check_resources=false is the user's choice: a warning, and the plan
    with caplog.at_level(logging.WARNING, logger="border_py.resources"):
        plan = resume(tmp_path, run, "check_resources=false")
    assert plan.config["check_resources"] is False
    assert "check_resources=false: replay_buffer.capacity=1000000000000" in caplog.text


@pytest.mark.slow
def test_border_train_refuses_the_resume_in_one_line_before_any_process(trained, tmp_path):
    run = huge_replay(trained, tmp_path)
    before = sorted(p.name for p in run.rglob("*"))
    proc, _, err, _, started, seen = run_watched(
        ["train", f"resume={run}", "trainer.max_opts=400"], tmp_path
    )
    assert proc.returncode == 2, err
    lines = [line for line in err.strip().splitlines() if "is not used" not in line]
    [error] = lines
    assert error.startswith("border: error: replay_buffer.capacity=1000000000000: the replay")
    assert started == [] and seen == []
    assert sorted(p.name for p in run.rglob("*")) == before


class FakeRun:
    """What ``wandb.init`` returns, enough for the recorder's ``open``."""

    id = "abc123"
    settings = SimpleNamespace(mode="offline")

    def define_metric(self, *args: Any, **kwargs: Any) -> None:
        pass


def wandb_init_arguments(plan: Any, run: Path, monkeypatch) -> dict[str, Any]:
    """The arguments the resumed run's W&B recorder gives ``wandb.init`` (no network: init is
    replaced by a recorder of its arguments)."""
    got: dict[str, Any] = {}

    def init(**kwargs: Any) -> FakeRun:
        got.update(kwargs)
        return FakeRun()

    monkeypatch.setattr(wandb, "init", init)
    build_recorders(plan.config.get("recorder")).open(run, plan.config, 300)
    return got


@pytest.mark.parametrize(
    "recorder",
    [
        {"wandb": ATTACKER},
        {"anything": ATTACKER},  # under another name
        ATTACKER,  # alone, as configs of earlier versions hold it
    ],
)
def test_a_saved_wandb_destination_is_not_used_on_resume(
    trained, tmp_path, monkeypatch, caplog, recorder
):
    """W&B applies ``wandb.init``'s arguments over the environment: a saved ``mode: online``
    would beat the user's ``WANDB_MODE=offline``. The resume gives W&B none of the saved three:
    ``mode`` null (W&B reads WANDB_MODE) and the default project and entity."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    run = crafted(trained, tmp_path, recorder=recorder)
    with caplog.at_level(logging.WARNING):
        plan = resume(tmp_path, run)
    got = wandb_init_arguments(plan, run, monkeypatch)
    assert (got["mode"], got["entity"], got["project"]) == (None, None, "border-py")
    assert "the saved" in caplog.text and "mode='online' is not used" in caplog.text


@pytest.mark.parametrize("mode", ["offline", "disabled"])
def test_a_saved_wandb_mode_that_keeps_the_data_in_is_kept_on_resume(
    trained, tmp_path, monkeypatch, caplog, mode
):
    """The user's own offline run, resumed by hand while logged in (``WANDB_MODE=online``),
    stays offline: no upload of what it recorded to stay on the machine. The saved entity and
    project are dropped as ever; the command line, or the config given to ``border_py.train``,
    still decides the mode."""
    monkeypatch.setenv("WANDB_MODE", "online")
    run = crafted(trained, tmp_path, recorder={"wandb": ATTACKER | {"mode": mode}})
    with caplog.at_level(logging.WARNING):
        plan = resume(tmp_path, run)
    got = wandb_init_arguments(plan, run, monkeypatch)
    assert (got["mode"], got["entity"], got["project"]) == (mode, None, "border-py")
    assert "mode=" not in caplog.text and "project='exfil' is not used" in caplog.text
    assert (
        wandb_init_arguments(resume(tmp_path, run, "recorder.wandb.mode=online"), run, monkeypatch)[
            "mode"
        ]
        == "online"
    )
    given = make_config(
        tmp_path, f"resume={run}", "trainer.max_opts=400", "++recorder.wandb.mode=online"
    )
    plan = prepare(given, overrides=["trainer.max_opts=400"])  # in the config, not an override
    assert wandb_init_arguments(plan, run, monkeypatch)["mode"] == "online"


def test_a_resumes_warning_names_a_saved_key_as_text(trained, tmp_path, caplog):
    """A key name of the saved config reaches the log record escaped, whatever handler a caller
    of ``border_py.train`` prints it with (border's own escape every line anyway:
    ``tests/security/test_terminal_text.py``)."""
    evil = "\x1b]8;;http://evil\x07click\x1b]8;;\x07"
    run = crafted(trained, tmp_path, recorder={evil: ATTACKER})
    with caplog.at_level(logging.INFO):
        resume(tmp_path, run)
    lines = [r.getMessage() for r in caplog.records if r.name == "border_py.runs.resume"]
    assert any(r"recorder.\x1b]8;;http://evil\x07click" in line for line in lines)
    assert not any("\x1b" in line or "\x07" in line for line in lines)


def test_the_command_line_decides_where_wandb_records(trained, tmp_path, monkeypatch):
    run = crafted(trained, tmp_path, recorder={"wandb": ATTACKER})
    given = ["recorder.wandb.mode=offline", "recorder.wandb.project=mine"]
    plan = resume(tmp_path, run, *given)
    got = wandb_init_arguments(plan, run, monkeypatch)
    assert (got["mode"], got["entity"], got["project"]) == ("offline", None, "mine")


@pytest.mark.parametrize("recorder", [{"mine": MLFLOW_STORE}, MLFLOW_STORE])
def test_a_saved_mlflow_store_is_not_used_on_resume(trained, tmp_path, recorder):
    """The trust gate refuses a saved ``recorder.mlflow.tracking_uri`` unless given again; under
    any other name, or alone as earlier versions saved a recorder, the saved URI is dropped and
    the default store decides."""
    run = crafted(trained, tmp_path, recorder=recorder)
    plan = resume(tmp_path, run)
    built = build_recorders(plan.config.get("recorder"))
    assert getattr(built, "members", [built])[0].tracking_uri is None
    canonical = crafted(trained, tmp_path / "canonical", recorder={"mlflow": MLFLOW_STORE})
    with pytest.raises(ConfigError, match=r"^recorder\.mlflow\.tracking_uri=http://127.*again"):
        resume(tmp_path, canonical)


def test_the_rule_finds_settings_by_target_at_any_depth():
    from border_py.runs.resume import without_user_settings

    mlflow = {"_target_": MLFLOW, "tracking_uri": "sqlite:///x.db"}  # trust's CALLER: kept
    offline = {"_target_": WANDB, "mode": "offline", "project": "p"}  # a safe mode: kept
    saved = {
        "check_resources": False,
        "recorder": {"x": {"_target_": WANDB, "mode": "online", "name": "kept"}, "mlflow": mlflow},
        "other": [{"_target_": MLFLOW, "tracking_uri": "sqlite:///x.db", "run_name": "kept"}],
        "env": {"mode": "kept", "project": "kept"},  # the same names elsewhere are not settings
        "more": {"y": offline, "z": {"_target_": WANDB, "mode": "sync"}},  # not a safe value
    }
    kept, held = without_user_settings(saved)
    assert kept == {
        "recorder": {"x": {"_target_": WANDB, "name": "kept"}, "mlflow": mlflow},
        "other": [{"_target_": MLFLOW, "run_name": "kept"}],
        "env": {"mode": "kept", "project": "kept"},
        "more": {"y": {"_target_": WANDB, "mode": "offline"}, "z": {"_target_": WANDB}},
    }
    assert held == {
        "check_resources": False,
        "recorder.x.mode": "online",
        "other.0.tracking_uri": "sqlite:///x.db",
        "more.y.mode": "offline",
        "more.y.project": "p",
        "more.z.mode": "sync",
    }
