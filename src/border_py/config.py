"""Config plumbing: where the configs live, the one instantiate helper, and value checks.

Everything that crosses a process boundary is plain, resolved data (see
:func:`border_py.overrides.to_plain`); components are built from it with :func:`build`, which
turns any mistake in a config group into one :class:`~border_py.errors.ConfigError` line that
names the key. Nothing here imports Hydra or OmegaConf: child processes use this module too.
"""

from __future__ import annotations

import collections.abc
import difflib
import importlib
import inspect
import logging
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from border_py.errors import ConfigError, first_line

__all__ = [
    "GROUPS",
    "OVERLAYS",
    "Rule",
    "build",
    "closest",
    "coerce_counts",
    "config_dir",
    "config_keys",
    "count",
    "describe_keys",
    "flag",
    "flatten",
    "fraction",
    "group_options",
    "is_base",
    "is_int",
    "is_number",
    "lookup",
    "niceness",
    "non_negative",
    "non_negative_number",
    "null_or",
    "number",
    "positive",
    "positive_count",
    "positive_number",
    "require",
    "resolve_target",
    "widths",
]

log = logging.getLogger(__name__)

# what a RuntimeError says when an allocation fails: PyTorch's CPU allocator, CUDA, or a size
# beyond what it can represent
ALLOCATION_FAILED = ("can't allocate memory", "out of memory", "size calculation overflowed")
GROUPS = ("agent", "env", "replay_buffer", "actor_manager", "trainer", "recorder")
OVERLAYS = ("experiment", "debug")  # `# @package _global_` files setting other groups' keys


def config_dir() -> Path:
    """The directory holding ``train.yaml``: inside the installed package, else the repo's ``conf/``."""
    packaged = Path(__file__).resolve().parent / "conf"
    if (packaged / "train.yaml").is_file():
        return packaged
    repo = Path(__file__).resolve().parents[2] / "conf"
    if (repo / "train.yaml").is_file():
        return repo
    raise FileNotFoundError(f"border-py configs not found in {packaged} or {repo}")


def is_base(option: str) -> bool:
    """Whether a config group's file is a base (``trainer/_loop.yaml``): keys the group's options
    share, composed into each by its ``defaults:`` list, and never an option to choose."""
    return option.rpartition("/")[2].startswith("_")


def group_options(group: str) -> list[str]:
    """Names of the options of a config group (the YAML files in its directory, bases aside)."""
    return sorted(p.stem for p in (config_dir() / group).glob("*.yaml") if not is_base(p.stem))


def lookup(config: Mapping[str, Any], key: str) -> Any:
    """The value at the dotted ``key`` of plain nested mappings (None where a part is missing)."""
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def flatten(config: Any) -> dict[str, Any]:
    """Plain nested mappings as ``dotted.key: value`` pairs, depth first: leaves only (a list is a
    leaf, an empty mapping gives no pair); :func:`lookup` reads a key back."""
    flat: dict[str, Any] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                walk(value, f"{prefix}.{key}" if prefix else str(key))
        else:
            flat[prefix] = node

    walk(config, "")
    return flat


def closest(word: str, choices: Iterable[str], prefix: str = "") -> str:
    """A ' (did you mean ...?)' hint, or '' when nothing is close; ``prefix`` goes before each
    suggestion (what the user typed before ``word``, so that the suggestion is what to type)."""
    match = difflib.get_close_matches(word, list(choices), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(prefix + m) for m in match)}?)" if match else ""


def resolve_target(path: str, key: str = "_target_") -> Any:
    """Import the object a ``_target_`` string names; ``key`` names the setting in errors."""
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(f"{key}={path}: cannot be imported ({exc})") from None


RUNTIME_KEYS: dict[str, tuple[str, ...]] = {
    "agent": ("observation_space", "action_space", "device", "seed"),
}  # keyword arguments border passes at build time, per group (never keys of the YAML)


def config_keys(target: Any, group: str) -> list[str] | None:
    """The keys a config of ``group`` may give ``target``: its named parameters minus the runtime
    ones; None when it also takes any keyword (``**kwargs``)."""
    params = inspect.signature(target).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    named = (p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    return [name for name in named if name not in RUNTIME_KEYS.get(group, ())]


def _required(target: Any, group: str) -> list[str]:
    """The keys ``target`` has no default for (the runtime ones aside)."""
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the call itself says what is missing
        return []
    return [
        p.name
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.default is p.empty
        and p.name not in RUNTIME_KEYS.get(group, ())
    ]


def describe_keys(target_path: str, keys: list[str] | None, group: str) -> str:
    """What a class takes, for an error line: ``'X takes: a, b'``, never an empty list."""
    if keys is None:
        return f"{target_path} takes any key (**kwargs)"
    if keys:
        return f"{target_path} takes: {', '.join(keys)}"
    runtime = RUNTIME_KEYS.get(group)
    besides = f" besides {', '.join(runtime)}, which border passes" if runtime else ""
    return f"{target_path} takes no keys{besides}"


def _only_int(annotation: Any) -> bool:
    """Whether an annotation is ``int`` or ``int | None`` (not ``float``, not ``bool``)."""
    if annotation is int:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(rest) == 1 and _only_int(rest[0])
    return False


def _int_sequence(annotation: Any) -> bool:
    """Whether an annotation is a list, tuple or sequence of ints (optionally ``| None``)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        return len(rest) == 1 and _int_sequence(rest[0])
    args = typing.get_args(annotation)
    if origin in (list, collections.abc.Sequence):
        return args == (int,)
    return origin is tuple and args == (int, ...)


def _integral(value: Any) -> bool:
    return isinstance(value, float) and value.is_integer()


def coerce_counts(target: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with integral floats (``1e4``: YAML and Hydra read it as a float) turned into
    ints where ``target``'s parameter is annotated ``int`` (or a sequence of ints).

    The annotations are those of the signature :func:`config_keys` reads the keys from, resolved
    (so ``from __future__ import annotations`` modules work); a target whose annotations cannot
    be resolved is left as it is.
    """
    try:
        params = inspect.signature(target, eval_str=True).parameters
    except Exception:  # an unresolvable name in a user's annotations: nothing to coerce by
        return kwargs
    out = dict(kwargs)
    for key, value in kwargs.items():
        annotation = params[key].annotation if key in params else None
        if _integral(value) and _only_int(annotation):
            out[key] = int(value)
        elif isinstance(value, (list, tuple)) and _int_sequence(annotation):
            out[key] = type(value)(int(v) if _integral(v) else v for v in value)
    return out


def build(group: str, spec: Mapping[str, Any], **runtime: Any) -> Any:
    """Instantiate ``spec['_target_']`` with the spec's keys plus ``runtime`` keyword arguments.

    Integral floats become ints where the target's parameter is annotated ``int`` (so
    ``trainer.max_opts=1e4`` works for every component, see :func:`coerce_counts`). Unknown keys
    (all of them, in one line), missing values, the component's own validation errors and a
    failed allocation while building it (a ``MemoryError``, or PyTorch's ``RuntimeError``: see
    :data:`ALLOCATION_FAILED`) become one :class:`ConfigError` naming ``group.key``.
    """
    if "_target_" not in spec:
        raise ConfigError(f"{group}: missing '_target_'")
    target_path = spec["_target_"]
    target = resolve_target(target_path, f"{group}._target_")
    kwargs = {k: v for k, v in spec.items() if not k.startswith("_")}
    for key in kwargs:
        if key in runtime:
            raise ConfigError(
                f"{group}.{key}: border passes {key} itself; remove it (~{group}.{key})"
            )
    keys = config_keys(target, group)
    if keys is not None:
        unknown = [key for key in kwargs if key not in keys]
        if len(unknown) == 1:
            raise ConfigError(
                f"{group}.{unknown[0]} is not a parameter of {target_path}"
                f"{closest(unknown[0], keys)}; {describe_keys(target_path, keys, group)}"
            )
        if unknown:
            removals = " ".join(f"~{group}.{key}" for key in unknown)
            raise ConfigError(
                f"{group}: {', '.join(unknown)} are not parameters of {target_path}"
                f" (remove them: {removals}); {describe_keys(target_path, keys, group)}"
            )
    for key, value in kwargs.items():
        if value == "???":
            raise ConfigError(f"{group}.{key} must be set (e.g. {group}.{key}=...)")
    missing = [k for k in _required(target, group) if k not in kwargs and k not in runtime]
    if missing:
        raise ConfigError(
            f"{group}: {', '.join(missing)} must be set ({target_path} has no default for"
            f" {'it' if len(missing) == 1 else 'them'})"
        )
    log.debug("building %s: %s", group, target_path)
    try:
        return target(**coerce_counts(target, kwargs), **runtime)
    except ConfigError as exc:
        named = str(exc).startswith((f"{group}.", f"{group}:"))  # already names the group
        raise ConfigError(str(exc) if named else f"{group}.{exc}") from None
    except (TypeError, ValueError) as exc:  # e.g. a string where the class needs a number
        raise ConfigError(f"{group}: {first_line(exc)}") from None
    except (MemoryError, RuntimeError) as exc:  # sizes beyond this machine no estimate caught
        failed = isinstance(exc, MemoryError) or any(w in str(exc) for w in ALLOCATION_FAILED)
        if not failed:
            raise
        raise ConfigError(
            f"{group}: {target_path} does not fit in memory ({first_line(exc)}); lower its sizes"
        ) from None


def require(key: str, ok: bool, expected: str, value: Any) -> None:
    """Raise ``ConfigError('<key>=<value>: must be <expected>')`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}={value!r}: must be {expected}")


def is_number(value: Any) -> typing.TypeGuard[int | float]:
    """Whether ``value`` is an int or a float; a bool is neither (YAML's ``true`` is no 1)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_int(value: Any) -> typing.TypeGuard[int]:
    """Whether ``value`` is an int, never a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Rule:
    """One kind of check of a setting: ``ok`` tells the values that pass, ``expected`` says what
    they are. ``rule(key, value)`` raises :class:`ConfigError` naming the key
    (``<key>=<value>: must be <expected>``)."""

    ok: Callable[[Any], bool]
    expected: str

    def __call__(self, key: str, value: Any) -> None:
        require(key, self.ok(value), self.expected, value)


def null_or(rule: Rule) -> Rule:
    """``rule``, or null (YAML's ``null``: Python's None)."""
    return Rule(lambda value: value is None or rule.ok(value), f"null or {rule.expected}")


number = Rule(is_number, "a number")
count = Rule(lambda value: is_int(value) and value >= 0, "a non-negative int")
positive_count = Rule(lambda value: is_int(value) and value > 0, "a positive int")
positive_number = Rule(lambda value: is_number(value) and value > 0, "a positive float")
non_negative_number = Rule(lambda value: is_number(value) and value >= 0, "a non-negative float")
niceness = Rule(lambda value: is_int(value) and 0 <= value <= 19, "an int in [0, 19]")  # Unix


def positive(key: str, value: Any, kind: type = float) -> None:
    """Check that ``value`` is a number > 0 (``kind`` int: an int, :data:`positive_count`)."""
    (positive_count if kind is int else positive_number)(key, value)


def non_negative(key: str, value: Any, kind: type = int) -> None:
    """Check that ``value`` is an int >= 0 (:data:`count`; ``kind`` float: any number >= 0)."""
    (count if kind is int else non_negative_number)(key, value)


def flag(key: str, value: Any) -> None:
    """Check that ``value`` is a bool (``true`` or ``false`` in YAML)."""
    require(key, isinstance(value, bool), "true or false", value)


def widths(key: str, value: Any, at_least: int = 0) -> None:
    """Check that ``value`` is a list of at least ``at_least`` positive ints (layer widths)."""
    ok = (
        isinstance(value, (list, tuple))
        and len(value) >= at_least
        and all(positive_count.ok(w) for w in value)
    )
    more = f" (at least {at_least})" if at_least else ""
    require(key, ok, f"a list of positive ints{more}, e.g. [64, 64]", value)


def fraction(key: str, value: Any, open_low: bool = False) -> None:
    """Check that ``value`` is a number in [0, 1] (``open_low``: in (0, 1])."""
    ok = is_number(value) and (value > 0 if open_low else value >= 0) and value <= 1
    require(key, ok, "in (0, 1]" if open_low else "in [0, 1]", value)
