"""What a saved run may make border import or call: a run dir is data, never code.

A checkpoint's ``config.json`` names components by ``_target_`` (and an env id ``module:Env-v0``
imports ``module``). Loading a run (``border eval``, ``border train resume=<dir>``,
``resume=auto``) builds those components, so whoever can write a run dir could otherwise run code
as whoever loads it. A saved config is therefore accepted only when everything it would import is
one of:

- border-py's own components: the targets of the shipped configs (``conf/``);
- a gymnasium wrapper class (``gymnasium.wrappers.*``) but those that write files
  (:data:`WRITING_WRAPPERS`);
- named by the config of the command that loads the run (its command line and the user's own
  config dirs; for :func:`border_py.train`, the config it is given);
- trusted by the user: ``trust=[my_pkg, other_pkg.MyAgent]`` (a package trusts its modules; never
  Python's standard library, whose modules run whatever they are asked to).

The same holds for the values that say where border takes code from or sends a run's data
(:data:`CALLERS`: a Ray cluster, a Ray ``runtime_env``, an MLflow server): a saved one is used only
when this command gives the same value. Anything else is refused in one line naming the key, the
value and the trust step. Saved strings stay data: their OmegaConf interpolations (``${...}``) are
escaped, never resolved (:func:`literal`).
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import yaml

from border_py.config import GROUPS, OVERLAYS, config_dir, lookup, require
from border_py.errors import ConfigError

__all__ = ["CALLERS", "Trust", "check_trust_list", "imports", "literal", "shipped_targets"]

CALLERS = {  # saved values used only when given again, and why
    "actor_manager.address": "a Ray cluster can run code in the learner",
    "actor_manager.runtime_env": "it installs packages and sets variables for the actors",
    "recorder.mlflow.tracking_uri": "the run's metrics, config and best policy go there",
}
WRITING_WRAPPERS = ("RecordVideo",)  # gymnasium wrappers that write files where a config says
DOTTED_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
INTERPOLATION = re.compile(r"(\\*)\$\{")


@functools.cache
def shipped_targets() -> frozenset[str]:
    """Every ``_target_`` of border-py's own config groups (``conf/<group>/*.yaml``)."""
    found: set[str] = set()
    for group in (*GROUPS, *OVERLAYS):
        for path in sorted((config_dir() / group).glob("*.yaml")):
            for _, _, target in imports(yaml.safe_load(path.read_text()) or {}):
                found.add(target)
    return frozenset(found)


def imports(node: Any, key: str = "") -> Iterator[tuple[str, str, str]]:
    """Each ``(key, value, what it imports)`` of a config: every ``_target_`` at any depth, and
    the module of an ``env.id`` of the form ``module:Env-v0``."""
    if isinstance(node, dict):
        for name, value in node.items():
            path = f"{key}.{name}" if key else str(name)
            if name == "_target_" and isinstance(value, str) and value != "???":
                yield path, value, value
            elif path == "env.id" and isinstance(value, str) and ":" in value:
                yield path, value, value.rpartition(":")[0]
            else:
                yield from imports(value, path)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from imports(value, f"{key}[{i}]")


def _gymnasium_wrapper(target: str) -> bool:
    """Whether ``target`` names a gymnasium wrapper class that keeps to its env (not one of
    :data:`WRITING_WRAPPERS`); only gymnasium's own modules are imported to tell."""
    module, _, name = target.rpartition(".")
    if module != "gymnasium.wrappers" and not module.startswith("gymnasium.wrappers."):
        return False
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False
    writes = any(found is getattr(gym.wrappers, w, None) for w in WRITING_WRAPPERS)
    return isinstance(found, type) and issubclass(found, gym.Wrapper) and not writes


def _standard_library(name: str) -> bool:
    """Whether ``name`` is in Python's standard library (``os``, ``subprocess``, ``builtins``)."""
    return name.split(".")[0] in sys.stdlib_module_names


def _set(value: Any) -> Any:
    """A saved or given value of :data:`CALLERS`, with an empty one (``{}``, ``""``) as none."""
    return value or None


def check_trust_list(entries: Any, key: str = "trust") -> tuple[str, ...]:
    """``trust``'s entries: a list of dotted names (a package, module or class); one name alone
    is a list of one, null none. Python's standard library cannot be trusted. Raises
    :class:`ConfigError` (one line) otherwise."""
    if entries is None:
        return ()
    if isinstance(entries, str):
        entries = [entries]
    ok = isinstance(entries, (list, tuple)) and all(
        isinstance(e, str) and DOTTED_NAME.match(e) for e in entries
    )
    require(key, ok, "a list of package, module or class names, e.g. [my_pkg]", entries)
    for entry in entries:
        if _standard_library(entry):
            raise ConfigError(
                f"{key}=[{entry}]: Python's standard library runs whatever a config asks it to"
                " (os.system, subprocess); trust your own packages, modules or classes only"
            )
    return tuple(entries)


@dataclass(frozen=True)
class Trust:
    """What a loading command trusts beyond border-py's and gymnasium's own components.

    Attributes:
        named: what the command's own config imports (its targets and env id modules).
        values: the command's own values of :data:`CALLERS` (key -> value).
        entries: the user's ``trust`` list: names whose modules and classes are trusted.
    """

    named: frozenset[str] = frozenset()
    values: tuple[tuple[str, Any], ...] = ()
    entries: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: dict[str, Any]) -> Trust:
        """The trust of a command whose own (composed, resolved) config is ``config``."""
        return cls(
            named=frozenset(target for _, _, target in imports(config)),
            values=tuple((key, _set(lookup(config, key))) for key in CALLERS),
            entries=check_trust_list(config.get("trust")),  # a command that names none: none
        )

    def allows(self, target: str) -> bool:
        """Whether a saved config may import ``target`` (a dotted name, or an env id's module)."""
        if target in shipped_targets() or target in self.named:
            return True
        if any(target == entry or target.startswith(f"{entry}.") for entry in self.entries):
            return True
        return _gymnasium_wrapper(target)

    def check(self, saved: dict[str, Any], source: Path) -> None:
        """Refuse a saved config (read from ``source``) that imports or calls what is not trusted
        (:meth:`check_imports` and :meth:`check_callers`).

        Raises:
            ConfigError: one line naming the first such key, its value and the trust step.
        """
        self.check_imports(saved, source)
        self.check_callers(saved, source)

    def check_imports(self, saved: dict[str, Any], source: Path) -> None:
        """Refuse a saved config naming anything to import, anywhere in it, that is not trusted
        (also in groups the loading command does not build: such a run dir is not one to load).

        Raises:
            ConfigError: one line naming the first such key, its target and the trust step.
        """
        for key, value, target in imports(saved):
            if self.allows(target):
                continue
            if _standard_library(target):
                raise ConfigError(
                    f"{key}={value} in {source}: a saved run may not import Python's standard"
                    " library; this run dir is not one to load"
                )
            raise ConfigError(
                f"{key}={value} in {source}: a saved run may import only border-py's and"
                " gymnasium's components and what this command names; if you trust the"
                f" run's code, add trust=[{target}]"
            )

    def check_callers(self, saved: dict[str, Any], source: Path) -> None:
        """Refuse a saved value of :data:`CALLERS` that this command does not give itself.

        Raises:
            ConfigError: one line naming the key, its saved value and why.
        """
        mine = dict(self.values)
        for key, why in CALLERS.items():
            value = _set(lookup(saved, key))
            if value is not None and value != mine.get(key):
                raise ConfigError(
                    f"{key}={value} in {source}: a saved run's {key} is used only when you give"
                    f" it again on this command line ({why})"
                )


def literal(node: Any) -> Any:
    """A saved config as plain data for OmegaConf: every ``${`` escaped, so that no interpolation
    or resolver (``${oc.env:...}``) in a file is ever resolved; OmegaConf gives the strings back
    unchanged."""
    if isinstance(node, dict):
        return {key: literal(value) for key, value in node.items()}
    if isinstance(node, list):
        return [literal(value) for value in node]
    if isinstance(node, str):
        return INTERPOLATION.sub(lambda m: m.group(1) * 2 + "\\${", node)
    return node
