"""``border train`` takes its own groups and keys only: an unknown top-level key added with ``+``
is refused in one line (Hydra's ``+`` stays for keys inside a group), ``tune/`` (``border tune``'s
search spaces) is no group of it, and neither ``--help`` nor tab completion lists it."""

from __future__ import annotations

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from border_py.cli.checks import check_overrides
from border_py.cli.config_source import ConfigSource, hide_from_listings
from border_py.config import config_dir
from border_py.errors import ConfigError

from ..conftest import run_borders
from .test_completion import _query

GROUPS = "actor_manager, agent, debug, env, experiment, recorder, replay_buffer, trainer"


def _refusal(*overrides: str) -> str:
    with pytest.raises(ConfigError) as refused:
        check_overrides(list(overrides), None, build=False)
    line = str(refused.value)
    assert "\n" not in line
    return line


@pytest.mark.parametrize("add", ["+agnet=dqn", "++agnet=dqn", "+agnet.lr=1", "+agnet/x=dqn"])
def test_an_unknown_top_level_key_added_with_plus_is_refused_naming_what_is_allowed(add):
    line = _refusal(add)
    assert line.startswith(f"{add}: unknown top-level key 'agnet' (did you mean 'agent'?)")
    assert f"groups: {GROUPS};" in line and "keys: seed, device, run_dir" in line
    assert "+env.kwargs.<name>=<value>" in line


def test_plus_still_adds_keys_inside_a_group_and_a_group_of_the_train_config():
    kept = ["+env.kwargs.render_mode=rgb_array", "+agent.weight_decay=0.0"]
    assert check_overrides(kept, None, build=False) == kept


def test_a_top_level_typo_is_not_told_to_add_itself_with_plus():
    line = _refusal("agnet=dqn")
    assert "did you mean 'agent'?" in line and "+agnet" not in line


@pytest.mark.parametrize("given", ["tune=dqn_cartpole", "+tune=dqn_cartpole"])
def test_a_tune_space_is_no_train_group_and_is_refused_naming_border_tune(given):
    assert _refusal(given) == (
        f"{given}: tune/ holds the configs of border tune, not a border train group;"
        " run: border tune dqn_cartpole"
    )


def test_the_catalog_and_hydras_group_lists_leave_tune_out():
    assert "tune" not in ConfigSource().catalog
    hide_from_listings()
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        hydra = GlobalHydra.instance().hydra
        assert hydra is not None
        groups = hydra.format_config_groups(lambda g: g != "hydra" and not g.startswith("hydra/"))
    listed = [line.split(":")[0] for line in groups.splitlines()]
    assert listed == GROUPS.split(", ")


@pytest.mark.slow
def test_the_command_exits_2_with_one_line_and_help_and_completion_list_no_tune(tmp_path):
    refused = [["+agnet=dqn"], ["tune=dqn_cartpole"], ["+tune=dqn_cartpole", "debug=tiny"]]
    calls = [*(["train", *args] for args in refused), ["train", "--help"]]
    *outs, shown = run_borders(calls, tmp_path, timeout=120)
    for args, out in zip(refused, outs, strict=True):
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        (line,) = out.stderr.strip().splitlines()
        assert line.startswith(f"border: error: {args[0]}: "), line
    assert not (tmp_path / "outputs").exists()  # nothing trained
    assert shown.returncode == 0
    groups = shown.stdout.split("== Config groups")[1].split("== Config (")[0]
    assert "agent: " in groups and "tune" not in groups
    assert not [w for w in _query(tmp_path, "border train ") if w.startswith("tune")]
    assert _query(tmp_path, "border train tu") == []
