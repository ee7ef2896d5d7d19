"""A saved config that lacks a key added since it was saved takes the shipped YAML's value: for the
run's own keys ``train.yaml``'s, for a group's the shipped option's that builds the same class
(``runs/compat.py``: :func:`~border_py.runs.compat.complete`), never a default of Python's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from border_py.config import build, config_dir
from border_py.errors import ConfigError
from border_py.runs.checkpoint import load_checkpoint
from border_py.runs.compat import complete
from border_py.runs.settings import RunSettings
from border_py.shipped import option_keys, run_keys

from ..conftest import run_border

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# What a 0.2.0 run dir's config.json is made to lack here: keys of the run, of the trainer, of the
# actors and of the agent (the fixture itself stays as it is: a copy is edited)
DROPPED = {
    None: ("progress_interval", "check_resources"),
    "trainer": ("prefetch", "keep_checkpoints"),
    "actor_manager": ("n_actors", "heartbeat_timeout"),
    "agent": ("eps_final",),
}


def _without(run: Path, dropped: dict[str | None, tuple[str, ...]]) -> None:
    """Remove ``dropped`` from every checkpoint's ``config.json`` of ``run``."""
    for path in (run / "checkpoints").glob("*/config.json"):
        config = json.loads(path.read_text())
        for group, keys in dropped.items():
            section = config if group is None else config[group]
            for key in keys:
                del section[key]
        path.write_text(json.dumps(config))


@pytest.fixture
def lacking(tmp_path) -> Path:
    """A copy of the async run border-py 0.2.0 wrote, its configs lacking :data:`DROPPED`."""
    copy = tmp_path / "async_0_2"
    shutil.copytree(FIXTURES / "async_0_2", copy, symlinks=True)
    _without(copy, DROPPED)
    return copy


def test_a_saved_config_lacking_keys_gets_the_shipped_values(lacking):
    saved = json.loads((FIXTURES / "async_0_2/checkpoints/best/config.json").read_text())
    config = load_checkpoint(lacking).config
    assert config["progress_interval"] == run_keys()["progress_interval"] == 30
    assert config["check_resources"] is True
    assert config["trainer"]["prefetch"] == option_keys("trainer", "_loop")["prefetch"] == 0
    assert config["trainer"]["keep_checkpoints"] == 3
    # the YAML's value, not the dataclass's of 0.2 (which was 1 actor)
    assert (
        config["actor_manager"]["n_actors"] == option_keys("actor_manager", "default")["n_actors"]
    )
    assert config["actor_manager"]["n_actors"] == 2
    assert config["actor_manager"]["heartbeat_timeout"] == 60
    assert config["agent"]["eps_final"] == option_keys("agent", "dqn")["eps_final"]
    # what the run saved keeps its values
    assert config["trainer"]["max_opts"] == saved["trainer"]["max_opts"] == 300
    assert config["actor_manager"]["n_buffer"] == saved["actor_manager"]["n_buffer"]
    assert config["progress"] is saved["progress"] is False
    RunSettings.of(config)
    assert build("trainer", config["trainer"]).prefetch == 0
    assert build("actor_manager", config["actor_manager"]).n_actors == 2


def test_the_values_are_read_from_the_shipped_yaml(tmp_path, monkeypatch):
    """Change a value in the YAML, and a config lacking its key gets the new one: no copy of it
    is written anywhere else."""
    conf = tmp_path / "conf"
    shutil.copytree(config_dir(), conf)
    loop = conf / "trainer" / "_loop.yaml"
    loop.write_text(loop.read_text().replace("prefetch: 0 ", "prefetch: 2 "))
    train = conf / "train.yaml"
    train.write_text(train.read_text().replace("progress_interval: 30", "progress_interval: 7"))
    monkeypatch.setattr("border_py.shipped.config_dir", lambda: conf)
    trainer = {"_target_": "border_py.trainers.serial.SerialSettings", "max_opts": 5}
    completed = complete({"seed": 3, "trainer": trainer})
    assert completed["trainer"]["prefetch"] == 2 and completed["trainer"]["max_opts"] == 5
    assert completed["progress_interval"] == 7 and completed["seed"] == 3


def test_a_class_no_shipped_option_names_is_left_as_saved():
    mine = {"_target_": "my_pkg.MyTrainer", "max_opts": 5}
    assert complete({"trainer": mine})["trainer"] == mine


def test_a_config_missing_a_key_of_the_run_is_one_line():
    config = complete({})
    del config["objective"]
    with pytest.raises(ConfigError) as refused:
        RunSettings.of(config)
    (line,) = str(refused.value).splitlines()
    assert line.startswith("objective: missing from the config (conf/train.yaml's keys: seed,")


def test_a_settings_key_missing_when_built_is_one_line_naming_it():
    keys = option_keys("trainer", "serial")
    del keys["prefetch"]
    with pytest.raises(ConfigError) as refused:
        build("trainer", keys)
    assert str(refused.value) == (
        "trainer: prefetch must be set (border_py.trainers.serial.SerialSettings has no default"
        " for it)"
    )


@pytest.mark.slow
def test_a_0_2_run_lacking_keys_added_since_resumes_and_saves_them(lacking):
    out = run_border(
        ["train", f"resume={lacking}", "trainer.max_opts=400", "progress=false"], lacking.parent
    )
    assert out.returncode == 0, out.stderr
    saved = json.loads((lacking / "checkpoints" / "000000400" / "config.json").read_text())
    assert saved["trainer"]["prefetch"] == 0 and saved["progress_interval"] == 30
    assert saved["actor_manager"]["n_actors"] == 2  # two actor processes ran
    assert len(load_checkpoint(lacking).state.actors["actors"]) == 2


def test_options_whose_keys_sit_under_names_of_their_own_fill_nothing():
    """``recorder``'s options sit at ``recorder.<name>``: a section naming a target directly
    is left as saved."""
    section = {"_target_": "border_py.recorders.TensorBoardRecorder"}
    assert complete({"recorder": section})["recorder"] == section
