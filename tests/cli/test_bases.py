"""A config group's bases (``trainer/_loop.yaml``: the keys its options share, composed into each
by its ``defaults:`` list) are no options: the command's catalog, Hydra's lists (``--help``, tab
completion, ``glob(*)`` sweeps) and the recipe lookup leave them out, and choosing one is refused."""

from __future__ import annotations

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from border_py.cli.checks import check_overrides
from border_py.cli.config_source import ConfigSource, hide_from_listings
from border_py.cli.recipes import recipes
from border_py.config import config_dir, group_options, is_base
from border_py.errors import ConfigError
from border_py.overrides import parse_overrides

BASES = {"trainer": "_loop", "actor_manager": "_actors", "env": "_env", "replay_buffer": "_replay"}


def test_each_base_is_a_file_of_its_group():
    for group, base in BASES.items():
        assert (config_dir() / group / f"{base}.yaml").is_file() and is_base(base)
        assert base not in group_options(group)
    assert not is_base("async") and is_base("trainer/_loop")


def test_the_catalog_lists_options_only():
    catalog = ConfigSource().catalog
    assert catalog["trainer"] == ["async", "serial"]
    assert catalog["actor_manager"] == ["default", "ray"]
    assert not [o for options in catalog.values() for o in options if is_base(o)]


def test_a_base_chosen_as_an_option_is_refused_in_one_line():
    with pytest.raises(ConfigError) as refused:
        check_overrides(["trainer=_loop"], None, build=False)
    assert str(refused.value) == (
        "trainer=_loop: unknown option of config group 'trainer'; choose from: async, serial"
    )


def test_hydras_lists_of_options_leave_the_bases_out():
    hide_from_listings()
    hide_from_listings()  # once is enough: a second call changes nothing
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        groups = hydra.format_config_groups(lambda group: not group.startswith("hydra/"))
        listed = dict(line.split(": ", 1) for line in groups.splitlines())
        assert listed["trainer"] == "async, serial" and listed["env"].startswith("atari,")
        assert not [o for options in listed.values() for o in options.split(", ") if is_base(o)]
        (swept,) = parse_overrides(["trainer=glob(*)"])
        swept.config_loader = hydra.config_loader
        assert list(swept.sweep_string_iterator()) == ["async", "serial"]


def test_the_recipe_lookup_reads_no_base(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "_shared.yaml").write_text(
        "defaults:\n  - override /agent: dqn\nenv:\n  id: Mine-v0\n"
    )
    assert ("dqn", "Mine-v0") not in recipes((f"file://{tmp_path}",))
