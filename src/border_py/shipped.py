"""border-py's own configs as shipped (``conf/``), read as Hydra composes them: the one home of
every default.

``train.yaml`` holds the defaults of the run's own keys (``seed``, ``device``, ...: :func:`run_keys`);
each option of a config group those of its component's keys, a base of the group
(``trainer/_loop.yaml``) those its options share, composed into each by its ``defaults:`` list
(:func:`option_keys`). Python code holds no second copy: a config that lacks a key, a saved
config of an earlier version above all, takes its value from here
(:func:`border_py.runs.compat.complete`), and code that builds settings itself starts from here
(:func:`option_keys`).

Only YAML is read (no Hydra, no OmegaConf: child processes import this module's layer), with
Hydra 1.3's rules for what is shipped: an option's ``defaults:`` names options of its own group
and ``_self_`` (its own keys; last when not named), merged in that order, mappings key by key.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from border_py.config import config_dir, is_base

__all__ = ["keys_of_target", "option_keys", "run_keys"]

SELF = "_self_"


@functools.cache
def _read(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text()) or {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: not a mapping")
    return loaded


def _packaged_elsewhere(path: Path) -> bool:
    """Whether the file names a package of its own (``# @package ...``): its keys do not sit at
    its group (``recorder/mlflow.yaml`` sits at ``recorder.mlflow``)."""
    with path.open() as lines:
        return any(line.startswith("# @package") for line in lines)


def _merge(base: dict[str, Any], keys: dict[str, Any]) -> dict[str, Any]:
    """``keys`` merged over ``base`` as OmegaConf merges configs: mappings key by key, any other
    value replaced."""
    out = dict(base)
    for key, value in keys.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def option_keys(group: str, option: str) -> dict[str, Any]:
    """The keys of a shipped option (or base) of ``group`` as Hydra composes them: the bases its
    ``defaults:`` names, then its own keys (``_self_``).

    Args:
        group: a config group (``trainer``).
        option: one of its options or bases (``async``, ``_loop``).

    Raises:
        ValueError: the option sits in a package of its own (``# @package``), or its
            ``defaults:`` names anything but options of its group and ``_self_``.
    """
    path = config_dir() / group / f"{option}.yaml"
    if _packaged_elsewhere(path):
        raise ValueError(f"{path}: its keys sit in a package of their own (# @package)")
    spec = dict(_read(path))
    defaults = list(spec.pop("defaults", None) or [])
    if SELF not in defaults:
        defaults.append(SELF)
    keys: dict[str, Any] = {}
    for entry in defaults:
        if entry == SELF:
            keys = _merge(keys, spec)
        elif isinstance(entry, str):
            keys = _merge(keys, option_keys(group, entry))
        else:
            raise ValueError(f"{path}: defaults: {entry!r} is not an option of {group}")
    return keys


@functools.cache
def _targets(root: Path, group: str) -> dict[str, list[str]]:
    """``_target_`` -> the options of ``group`` in ``root`` that name it: those whose keys sit at
    their group (not ``recorder``'s, each under a name of its own, nor one made of them)."""
    found: dict[str, list[str]] = {}
    for path in sorted((root / group).glob("*.yaml")):
        if is_base(path.stem):
            continue
        try:
            target = option_keys(group, path.stem).get("_target_")
        except ValueError:  # keys in a package of their own
            continue
        if isinstance(target, str):
            found.setdefault(target, []).append(path.stem)
    return found


def keys_of_target(group: str, target: str) -> dict[str, Any] | None:
    """The composed keys of the one shipped option of ``group`` whose ``_target_`` is ``target``;
    None when no shipped option, or more than one (``env``'s GymEnvFactory), names it."""
    options = _targets(config_dir(), group).get(target, [])
    return option_keys(group, options[0]) if len(options) == 1 else None


def run_keys() -> dict[str, Any]:
    """``train.yaml``'s own keys (the run's: ``seed``, ``device``, ...) with their values; its
    ``defaults`` list and ``hydra`` node aside."""
    spec = _read(config_dir() / "train.yaml")
    return {k: copy.deepcopy(v) for k, v in spec.items() if k not in ("defaults", "hydra")}
