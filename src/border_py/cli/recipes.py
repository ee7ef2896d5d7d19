"""Recipes looked up by task, as RL Zoo does: ``border train env=gym env.id=Acrobot-v1 agent=dqn``
trains with the shipped recipe for DQN on Acrobot-v1 (``experiment=dqn_acrobot``).

The rule: when the command names no ``experiment``, the agent option and the env id it trains
(from ``agent=``, ``env=`` and ``env.id=``, else the defaults) are looked up among the recipes
(``experiment/*.yaml``, each naming its agent and env): the shipped ones and those on the
command's own config path (``--config-dir DIR``, ``hydra.searchpath=[...]``), read in the order
Hydra searches them. A match is applied as if ``experiment=<name>`` were given, so every
``key=value`` on the command line still wins over the recipe. A recipe of yours for a task that a
shipped recipe also trains is the one looked up (a file of yours named like a shipped one is not
read: Hydra loads the shipped file for that name). ``experiment=none`` turns the lookup off; a
sweep over the agent, env or env id skips it. A recipe that sets ``env.flicker`` (a game whose
screen blanks at random: another task than its id names) is never looked up: name it.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from border_py.cli.config_source import ConfigSource
from border_py.config import config_dir, is_base
from border_py.errors import ConfigError
from border_py.overrides import parse_overrides

if TYPE_CHECKING:
    from importlib.abc import Traversable

__all__ = ["lookup", "recipes", "searchpath_of"]

DEFAULT_AGENT, DEFAULT_ENV = "dqn", "cartpole"  # conf/train.yaml's defaults


def _choice(overrides: list[str], key: str) -> str | None:
    values = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == key]
    return values[-1].strip("'\"") if values else None


def _read(path: Traversable) -> dict[str, Any]:
    """A config file's YAML, or {} when it is not a readable mapping (composing it says why)."""
    try:
        spec = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}
    return spec if isinstance(spec, dict) else {}


def _roots(searchpath: tuple[str, ...]) -> list[Traversable]:
    """The config dirs Hydra searches, in its order: border's own, then ``searchpath``'s
    (``file://`` dirs and ``pkg://`` packages; one that cannot be read is left out)."""
    roots: list[Traversable] = [config_dir()]
    for entry in searchpath:
        scheme, sep, where = entry.partition("://")
        if not sep:
            scheme, where = "file", entry
        if scheme == "file":
            roots.append(Path(where))
        elif scheme == "pkg":
            try:
                roots.append(resources.files(where.replace("/", ".").rstrip(".")))
            except (ModuleNotFoundError, ValueError, TypeError):
                continue
    return roots


def _env_id(option: str, roots: list[Traversable]) -> str | None:
    """The env id of the env option ``option`` (the first of its files on the search path)."""
    for root in roots:
        path = root / "env" / f"{option}.yaml"
        if path.is_file():
            env_id = _read(path).get("id")
            return None if env_id in (None, "???") else str(env_id)
    return None


def _scan(root: Traversable, roots: list[Traversable]) -> dict[str, tuple[str, str]]:
    """Recipe name -> the (agent option, env id) it trains, for ``root``'s ``experiment/``."""
    found: dict[str, tuple[str, str]] = {}
    folder = root / "experiment"
    if not folder.is_dir():
        return found
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".yaml") or is_base(path.name):
            continue
        spec = _read(path)
        chosen = {}
        for entry in spec.get("defaults") or []:
            if isinstance(entry, dict):
                for key, value in entry.items():
                    chosen[str(key).removeprefix("override /")] = str(value)
        agent, env = chosen.get("agent"), chosen.get("env")
        section = spec.get("env")
        if isinstance(section, dict) and section.get("flicker"):
            continue  # a flickering game is another task than its id: chosen by name only
        env_id = (section.get("id") if isinstance(section, dict) else None) or (
            env and _env_id(env, roots)
        )
        if agent and env_id:
            found[path.name.removesuffix(".yaml")] = (agent, str(env_id))
    return found


@cache
def _shipped() -> dict[str, tuple[str, str]]:
    return _scan(config_dir(), [config_dir()])


def recipes(searchpath: tuple[str, ...] = ()) -> dict[tuple[str, str], str]:
    """(agent option, env id) -> the recipe (experiment) that trains it: the shipped ones, then
    those of ``searchpath``'s config dirs (Hydra search-path entries), which win for a task both
    have; a name already found is not read again (Hydra loads the first file of a name)."""
    roots = _roots(searchpath)
    names = dict(_shipped())
    for root in roots[1:]:
        for name, task in _scan(root, roots).items():
            names.setdefault(name, task)
    found: dict[tuple[str, str], str] = {}
    for name, task in names.items():  # the shipped ones first: a user's recipe comes later
        found[task] = name
    return found


def searchpath_of(overrides: list[str], config_dir: str | None = None) -> tuple[str, ...]:
    """The search-path entries a ``border train`` command line adds (``--config-dir`` and
    ``hydra.searchpath=``); none when they do not parse (the check of the overrides says why)."""
    try:
        return ConfigSource.of(parse_overrides(overrides), config_dir).searchpath
    except ConfigError:
        return ()


def lookup(overrides: list[str], config_dir: str | None = None) -> str | None:
    """The recipe the rule (see the module docstring) picks for these overrides (and
    ``--config-dir``), if any."""
    if any(o.split("=", 1)[0].lstrip("+~") == "experiment" for o in overrides):
        return None
    for key in ("agent", "env", "env.id"):
        value = _choice(overrides, key)
        if value is not None and ("," in value or "(" in value):  # swept: one recipe cannot fit
            return None
    searchpath = searchpath_of(overrides, config_dir)
    agent = _choice(overrides, "agent") or DEFAULT_AGENT
    env_id = _choice(overrides, "env.id") or _env_id(
        _choice(overrides, "env") or DEFAULT_ENV, _roots(searchpath)
    )
    if env_id is None:
        return None
    return recipes(searchpath).get((agent, env_id))
