"""Config plumbing: where the configs live, the one instantiate helper, and value checks.

Everything that crosses a process boundary is plain, resolved data (see
:func:`border_py.overrides.to_plain`); components are built from it with :func:`build`, which
turns any mistake in a config group into one :class:`~border_py.errors.ConfigError` line that
names the key. Nothing here imports Hydra or OmegaConf: child processes use this module too.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from border_py.errors import ConfigError

log = logging.getLogger(__name__)

GROUPS = ("agent", "env", "replay_buffer", "actor_manager", "trainer", "recorder")
OVERLAYS = ("experiment",)  # `# @package _global_` files setting other groups' keys


def config_dir() -> Path:
    """The directory holding ``train.yaml``: inside the installed package, else the repo's ``conf/``."""
    packaged = Path(__file__).resolve().parent / "conf"
    if (packaged / "train.yaml").is_file():
        return packaged
    repo = Path(__file__).resolve().parents[2] / "conf"
    if (repo / "train.yaml").is_file():
        return repo
    raise FileNotFoundError(f"border-py configs not found in {packaged} or {repo}")


def group_options(group: str) -> list[str]:
    """Names of the options of a config group (the YAML files in its directory)."""
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml"))


def closest(word: str, choices: Iterable[str]) -> str:
    """A ' (did you mean ...?)' hint, or '' when nothing is close."""
    match = difflib.get_close_matches(word, list(choices), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(m) for m in match)}?)" if match else ""


def resolve_target(path: str) -> Any:
    """Import the object a ``_target_`` string names."""
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"_target_ '{path}' cannot be imported: {exc}") from None


def build(group: str, spec: Mapping[str, Any], **runtime: Any) -> Any:
    """Instantiate ``spec['_target_']`` with the spec's keys plus ``runtime`` keyword arguments.

    Unknown keys, missing values and the component's own validation errors become one
    :class:`ConfigError` naming ``group.key``.
    """
    if "_target_" not in spec:
        raise ConfigError(f"{group}: missing '_target_'")
    target = resolve_target(spec["_target_"])
    kwargs = {k: v for k, v in spec.items() if not k.startswith("_")}
    params = inspect.signature(target).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if not takes_any:
        for key in kwargs:
            if key not in params:
                raise ConfigError(
                    f"{group}.{key} is not a parameter of {spec['_target_']}{closest(key, params)}"
                )
    for key, value in kwargs.items():
        if value == "???":
            raise ConfigError(f"{group}.{key} must be set (e.g. {group}.{key}=...)")
    log.debug("building %s: %s", group, spec["_target_"])
    try:
        return target(**kwargs, **runtime)
    except ConfigError as exc:
        raise ConfigError(f"{group}.{exc}") from None
    except (TypeError, ValueError) as exc:  # e.g. a string where the class needs a number
        raise ConfigError(f"{group}: {str(exc).splitlines()[0]}") from None


def require(key: str, ok: bool, expected: str, value: Any) -> None:
    """Raise ``ConfigError('<key>=<value>: must be <expected>')`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: must be {expected}")


def positive(key: str, value: Any, kind: type = float) -> None:
    """Check that ``value`` is a number of ``kind`` (bool excluded) and > 0."""
    is_number = isinstance(value, (int, float) if kind is float else int) and not isinstance(
        value, bool
    )
    require(key, is_number and value > 0, f"a positive {kind.__name__}", value)


def non_negative(key: str, value: Any, kind: type = int) -> None:
    """Check that ``value`` is a number of ``kind`` (bool excluded) and >= 0."""
    is_number = isinstance(value, (int, float) if kind is float else int) and not isinstance(
        value, bool
    )
    require(key, is_number and value >= 0, f"a non-negative {kind.__name__}", value)


def flag(key: str, value: Any) -> None:
    """Check that ``value`` is a bool (``true`` or ``false`` in YAML)."""
    require(key, isinstance(value, bool), "true or false", value)


def widths(key: str, value: Any, at_least: int = 0) -> None:
    """Check that ``value`` is a list of at least ``at_least`` positive ints (layer widths)."""
    ok = (
        isinstance(value, (list, tuple))
        and len(value) >= at_least
        and all(isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in value)
    )
    more = f" (at least {at_least})" if at_least else ""
    require(key, ok, f"a list of positive ints{more}, e.g. [64, 64]", value)


def fraction(key: str, value: Any, open_low: bool = False) -> None:
    """Check that ``value`` is a number in [0, 1] (``open_low``: in (0, 1])."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = number and (value > 0 if open_low else value >= 0) and value <= 1
    require(key, ok, "in (0, 1]" if open_low else "in [0, 1]", value)
