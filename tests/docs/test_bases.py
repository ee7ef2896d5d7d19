"""docs/02-guide/configuration.md, "Where a default lives": an option of a user's own composes
its group's base through its ``defaults:`` list (``my_pkg/conf/env/my_env.yaml``, the page's
example), so it writes only what differs; the base is composed, never listed as an option."""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import OmegaConf

from border_py.cli.config_source import ConfigSource
from border_py.shipped import option_keys

MY_CONF = Path(__file__).parent / "my_pkg" / "conf"


def test_an_option_of_your_own_composes_the_groups_base_then_its_own_keys():
    source = ConfigSource((f"file://{MY_CONF}",))
    composed = OmegaConf.to_container(source.compose(["env=my_env"]).env)
    own = yaml.safe_load((MY_CONF / "env" / "my_env.yaml").read_text())
    assert own.pop("defaults") == ["_env", "_self_"]
    base = option_keys("env", "_env")
    assert set(base) == {"kwargs", "max_episode_steps", "wrappers", "backend", "vector"}
    assert composed == base | own  # the base's keys, then the option's, which win
    assert base["max_episode_steps"] is None and composed["max_episode_steps"] == 100
    assert "my_env" in source.catalog["env"] and "_env" not in source.catalog["env"]
