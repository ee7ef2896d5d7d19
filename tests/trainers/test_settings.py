"""trainers/settings.py and the trainer options: one replay ratio serves both trainers."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from border_py import train
from border_py.config import build
from border_py.errors import ConfigError
from border_py.overrides import to_plain
from border_py.trainers.async_trainer import AsyncSettings
from border_py.trainers.serial import SerialSettings
from border_py.trainers.train import NEEDED_GROUPS, prepare

from ..conftest import TINY, make_config

DEFAULT_RATIO = 32  # docs/02-guide/configuration.md: one replay ratio serves both trainers


def _trainer_and_batch(tmp_path, trainer: str) -> tuple[object, int]:
    cfg = make_config(tmp_path, "experiment=none", f"trainer={trainer}")
    spec = OmegaConf.to_container(cfg.trainer, resolve=True)
    return build("trainer", spec), int(cfg.agent.batch_size)


def test_experiment_none_gives_both_trainers_one_replay_ratio(tmp_path):
    serial, batch = _trainer_and_batch(tmp_path, "serial")
    assert isinstance(serial, SerialSettings)
    # what the serial schedule holds: opt steps x batch size per env step
    assert batch / serial.env_steps_per_opt(batch) == DEFAULT_RATIO
    asynchronous, async_batch = _trainer_and_batch(tmp_path, "async")
    assert isinstance(asynchronous, AsyncSettings) and async_batch == batch
    # the async gates then come from the ratio alone (the per-opt sample keys stay unset)
    assert asynchronous.replay_ratio == DEFAULT_RATIO
    assert asynchronous.min_samples_per_opt == 0 and asynchronous.max_samples_per_opt is None


def test_the_async_trainer_refuses_actors_settings_without_a_runtime_before_the_run_starts(
    tmp_path,
):
    """Settings of no actors that run (``ActorSettings`` itself) are refused while the config is
    validated, in one line: the run dir is never claimed, no ``result.json`` says it failed."""
    config = to_plain(make_config(tmp_path, *TINY, "trainer=async"))
    for key in ("nice", "start_method"):  # LocalActorSettings' own
        del config["actor_manager"][key]
    config["actor_manager"]["_target_"] = "border_py.actors.settings.ActorSettings"
    with pytest.raises(ConfigError, match=r"^actor_manager: ActorSettings holds settings only;"):
        prepare(config)
    with pytest.raises(ConfigError, match=r"^actor_manager: ActorSettings holds settings only;"):
        train(config)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("group", NEEDED_GROUPS)
def test_a_python_config_missing_a_group_is_refused_in_one_line_naming_it(tmp_path, group):
    """A config built by hand without a whole group (``train({...})`` from Python) is one
    ``ConfigError`` line naming the group and the groups a config needs, before the run dir is
    claimed (it was a ``KeyError`` traceback)."""
    config = to_plain(make_config(tmp_path, *TINY))
    del config[group]
    needed = ", ".join(NEEDED_GROUPS)
    for call in (prepare, train):
        with pytest.raises(ConfigError) as raised:
            call(config)
        line = str(raised.value)
        assert "\n" not in line
        assert line.startswith(f"{group}: missing from the config (a config needs the groups")
        assert needed in line
    assert not (tmp_path / "run").exists()


def test_a_config_without_a_recorder_group_is_not_refused(tmp_path):
    """``recorder`` may be absent (TensorBoard's, the shipped default): not a needed group."""
    config = to_plain(make_config(tmp_path, *TINY))
    del config["recorder"]
    assert prepare(config).config.get("recorder") is None
