"""One home per default, checked by tool: the YAML. ``train.yaml``'s own keys have their defaults
there and nowhere in ``src/``; no two files of a component group repeat a key with the same value
(the shared keys sit in the group's base, ``trainer/_loop.yaml``); the settings dataclasses hold
no defaults; and what Python reads of the shipped configs (``border_py.shipped``) is what Hydra
composes."""

from __future__ import annotations

import ast
import dataclasses
import functools
import itertools
from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from border_py.actors.local import LocalActorSettings
from border_py.actors.ray.actors import RayActorSettings
from border_py.actors.settings import ActorSettings
from border_py.config import GROUPS, config_dir, config_keys, group_options, resolve_target
from border_py.runs.settings import RunSettings
from border_py.shipped import option_keys, run_keys
from border_py.trainers.async_trainer import AsyncSettings
from border_py.trainers.serial import SerialSettings
from border_py.trainers.settings import LoopSettings

SRC = Path(__file__).resolve().parents[1] / "src" / "border_py"
SETTINGS = (
    LoopSettings,
    SerialSettings,
    AsyncSettings,
    ActorSettings,
    LocalActorSettings,
    RayActorSettings,
)
BASES = {("trainer", "_loop"): LoopSettings, ("actor_manager", "_actors"): ActorSettings}
# Groups whose files may agree on a value without repeating a default: each agent's keys are its
# own algorithm's hyper-parameters (gamma 0.99 in DQN and in SAC are two tunings that agree; a base
# shared by both would tie one's tuning to the other's), and `recorder`'s options sit under names
# of their own (recorder.tensorboard, recorder.mlflow).
OWN_VALUES = ("agent", "recorder")


def _calls_with_defaults(tree: ast.AST, keys: set[str]) -> list[tuple[int, str]]:
    """``x.get("<key>", default)`` and ``x.get("<key>") or default`` in ``tree``, for ``keys``
    (optuna's ``trial.user_attrs`` aside: a trial's attributes, no config)."""

    def key_of(node: ast.AST) -> str | None:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            return None
        if (
            node.func.attr != "get"
            or not node.args
            or ast.unparse(node.func.value).endswith("user_attrs")
        ):
            return None
        first = node.args[0]
        return first.value if isinstance(first, ast.Constant) and first.value in keys else None

    found = []
    for node in ast.walk(tree):
        key = key_of(node)
        if key is not None and len(node.args) + len(node.keywords) > 1:  # type: ignore[attr-defined]
            found.append((node.lineno, key))
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            key = key_of(node.values[0])
            if key is not None:
                found.append((node.lineno, key))
    return found


def test_each_key_of_train_yaml_has_its_default_there_only():
    """``RunSettings`` holds exactly ``train.yaml``'s own keys, without a default of its own, and
    no module of ``src/`` reads one of them with a fallback value."""
    keys = set(run_keys())
    fields = dataclasses.fields(RunSettings)
    assert {f.name for f in fields} == keys
    assert all(f.default is dataclasses.MISSING and f.kw_only for f in fields)
    found = [
        f"{path.relative_to(SRC)}:{line}: {key}"
        for path in sorted(SRC.rglob("*.py"))
        for line, key in _calls_with_defaults(ast.parse(path.read_text()), keys)
    ]
    assert found == []


def test_the_default_finder_sees_both_forms():
    code = 'a = config.get("seed", 0)\nb = cfg.get("trust") or []\nc = t.user_attrs.get("seed", 1)'
    assert _calls_with_defaults(ast.parse(code), {"seed", "trust"}) == [(1, "seed"), (2, "trust")]


# Modules that read train.yaml's keys from a raw mapping: RunSettings itself, and the compat and
# shipped modules, which handle YAML before there is a run config.
RAW_YAML = ("runs/settings.py", "runs/compat.py", "shipped.py")
# Subscripts by a run key of what is no run config: (module, what is subscripted), and why.
NOT_A_CONFIG = {
    ("cli/eval.py", "plain"): "border eval's own config: eval.yaml's check_resources",
    ("cli/eval.py", "settings"): "border eval's own config: eval.yaml's check_resources",
    ("cli/eval.py", "asked"): "border eval's eval group: eval.seed",
    ("cli/train.py", "summary"): "a run's summary: its objective value",
    ("recorders/console.py", "summary"): "a run's summary: its objective value",
    ("tuning/trial.py", "summary"): "a run's summary: its objective value",
    ("tuning/trial.py", "spec"): "the tuner's sampler spec: its seed",
    ("envs/vector.py", "start"): "an env's reset arguments",
}


def _run_key_reads(tree: ast.AST, keys: set[str]) -> list[tuple[int, str, str]]:
    """``x["<key>"]`` read (not assigned) in ``tree`` for ``keys``: (line, ``x`` as written, key)."""
    return [
        (node.lineno, ast.unparse(node.value), node.slice.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Subscript)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.slice, ast.Constant)
        and node.slice.value in keys
    ]


def test_only_run_settings_read_train_yaml_keys_from_a_config():
    """``RunSettings.of`` reads a run's own keys once and the run passes the settings on; no other
    module of ``src/`` indexes a config by one of them (a saved run's seed:
    ``RunSettings.seed_of``). A run's config may still be *written* (the session settles
    ``resume``)."""
    keys = set(run_keys())
    found = [
        f"{name}:{line}: {receiver}[{key!r}]"
        for path in sorted(SRC.rglob("*.py"))
        if (name := path.relative_to(SRC).as_posix()) not in RAW_YAML
        for line, receiver, key in _run_key_reads(ast.parse(path.read_text()), keys)
        if (name, receiver) not in NOT_A_CONFIG
    ]
    assert found == []


def test_the_run_key_finder_sees_reads_of_any_form_and_no_write():
    code = (
        'a = config["seed"]\nb = self.config["trust"]\nconfig["resume"] = None\n'
        'c = to_plain(cfg)["objective"]\nd = config["agent"]\ne = checkpoint.config["seed"]'
    )
    assert _run_key_reads(ast.parse(code), {"seed", "trust", "resume", "objective"}) == [
        (1, "config", "seed"),
        (2, "self.config", "trust"),
        (4, "to_plain(cfg)", "objective"),
        (6, "checkpoint.config", "seed"),
    ]


def _own_keys(path: Path) -> dict[str, object]:
    """A config file's own keys (its ``defaults:`` list aside)."""
    spec = yaml.safe_load(path.read_text()) or {}
    return {k: v for k, v in spec.items() if k != "defaults"}


@pytest.mark.parametrize("group", [g for g in GROUPS if g not in OWN_VALUES])
def test_no_two_files_of_a_group_repeat_a_key_with_the_same_value(group):
    """A value the options of a group share is written once, in the group's base."""
    files = sorted((config_dir() / group).glob("*.yaml"))
    repeated = [
        f"{a.name} and {b.name}: {key}={value!r}"
        for a, b in itertools.combinations(files, 2)
        for key, value in _own_keys(a).items()
        if key != "_target_" and key in _own_keys(b) and _own_keys(b)[key] == value
    ]
    assert repeated == []


def test_the_settings_dataclasses_hold_no_defaults():
    """Their keys' values come from the YAML (no second copy to drift): every field is
    keyword-only, without a default; every class an option of their groups builds is one."""
    built = {
        resolve_target(option_keys(group, option)["_target_"])
        for group in ("trainer", "actor_manager")
        for option in group_options(group)
    }
    assert built <= set(SETTINGS)
    with_defaults = [
        f"{cls.__name__}.{f.name}"
        for cls in SETTINGS
        for f in dataclasses.fields(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    ]
    assert with_defaults == []
    assert all(f.kw_only for cls in SETTINGS for f in dataclasses.fields(cls))


@pytest.mark.parametrize(("base", "cls"), BASES.items())
def test_a_base_holds_the_keys_of_the_settings_its_options_share(base, cls):
    assert set(option_keys(*base)) == {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("option", [o for o in group_options("agent") if o != "custom"])
def test_an_agent_yaml_gives_every_hyper_parameter(option):
    """The agents' dataclass defaults are their Python API's: a config gives every key, so a run
    never falls back on them."""
    keys = option_keys("agent", option)
    assert set(config_keys(resolve_target(keys["_target_"]), "agent") or ()) == set(keys) - {
        "_target_"
    }


@functools.cache
def _composed(group: str, option: str) -> dict[str, object]:
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        extra = ["agent._target_=my_pkg.Agent"] if option == "custom" else []
        cfg = compose("train", overrides=[f"{group}={option}", *extra])
    return OmegaConf.to_container(cfg[group])  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("group", "option"),
    [(g, o) for g in GROUPS if g != "recorder" for o in group_options(g) if o != "custom"],
)
def test_the_shipped_keys_python_reads_are_what_hydra_composes(group, option):
    assert option_keys(group, option) == _composed(group, option)


def test_run_keys_are_the_top_level_keys_hydra_composes():
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        cfg = OmegaConf.to_container(compose("train"))
    assert run_keys() == {k: v for k, v in cfg.items() if k not in (*GROUPS, "hydra")}
