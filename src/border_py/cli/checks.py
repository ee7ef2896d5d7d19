"""Checking ``border train``'s overrides before Hydra runs: one line for any mistake.

Group options and keys are checked against the configs Hydra will compose: border's own plus a
user's (``--config-dir``, ``hydra.searchpath=[...]``; see :mod:`border_py.cli.config_source`).
Keys are checked against the class a node targets (its signature), a ``_target_`` override may
not hand one class's keys to another, and the whole config is built as a run would build it
(except for ``--cfg``, ``--info``, ``--help``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from border_py.cli.config_source import ConfigSource
from border_py.config import closest, config_keys, describe_keys, resolve_target
from border_py.errors import ConfigError
from border_py.overrides import parse_overrides
from border_py.trainers.train import prepare

__all__ = ["check_overrides"]


def _values(override: Override) -> list[str]:
    """The override's values as strings: one, every value of a sweep, or none for a sweep that is
    not a list (an Optuna ``interval(...)``: its values are the sweeper's to draw)."""
    if not override.is_sweep_override():
        return [override.get_value_element_as_str()]
    try:
        return list(override.sweep_string_iterator())
    except (HydraException, TypeError, ValueError):
        return []


PREFIX = {OverrideType.CHANGE: "", OverrideType.ADD: "+", OverrideType.FORCE_ADD: "++"}


def _line(override: Override, value: str) -> str:
    """``override`` with one of its values, as an override string (``+key=value`` keeps its +)."""
    return f"{PREFIX[override.type]}{override.key_or_group}={value}"


def _check_group(override: Override, source: ConfigSource) -> list[str]:
    """The values of a group override (``agent=dqn``), each an option of the group."""
    name = override.key_or_group
    options = source.catalog[name]
    chosen = override.value() if not override.is_sweep_override() else None
    if isinstance(chosen, list):  # group=[a,b]: several options of one group, combined
        _check_options(name, [str(v) for v in chosen], options)
        return [override.get_value_element_as_str()]
    values = _values(override)
    _check_options(name, values, options)
    return values


def _check_options(name: str, values: list[str], options: list[str]) -> None:
    for value in values:
        if value not in options:
            raise ConfigError(
                f"{name}={value}: unknown option of config group '{name}'{closest(value, options)};"
                f" choose from: {', '.join(options)}"
            )


def _node_target(node: DictConfig, path: str, targets: dict[str, str]) -> str | None:
    """The ``_target_`` a config node will have (a command-line override wins); None if unset."""
    if path in targets:
        return targets[path]
    if "_target_" not in node or OmegaConf.is_missing(node, "_target_"):
        return None
    return str(node["_target_"])


def _descend(cfg: DictConfig, key: str) -> tuple[Any, list[str], str | None]:
    """Walk ``cfg`` along the dotted ``key``: (the last node or value reached, its path, the first
    part not found there, or None when the whole key exists)."""
    node: Any = cfg
    path: list[str] = []
    for part in key.split("."):
        if isinstance(node, DictConfig) and part in node.keys():  # noqa: SIM118 (`in` is False for ??? values)
            child = OmegaConf.select(node, part, throw_on_missing=False)
        elif isinstance(node, ListConfig) and part.isdigit() and int(part) < len(node):
            child = node[int(part)]
        else:
            return node, path, part
        node = child
        path.append(part)
    return node, path, None


def _check_key(cfg: DictConfig, override: Override, text: str, targets: dict[str, str]) -> None:
    """Raise :class:`ConfigError` for ``key=value`` (given as ``text``) whose key is not in
    ``cfg``, saying what to type instead: the ``+key`` form for a parameter the config lacks, else
    the valid keys (those of the class the node targets, see :func:`~border_py.config.config_keys`)."""
    key = override.key_or_group
    node, path, missing = _descend(cfg, key)
    if missing is None:
        return
    where = ".".join(path)
    add = f"+{text}"
    if isinstance(node, ListConfig):
        raise ConfigError(
            f"{key}: {where} is a list of {len(node)} items (indexes 0..{len(node) - 1})"
        )
    if not isinstance(node, DictConfig):
        raise ConfigError(f"{key}: {where} is a value ({node!r}), not a mapping of keys")
    if not path:  # no run reads a new top-level key: no + form to suggest
        valid = [str(k) for k in node]
        raise ConfigError(
            f"{key}: unknown key '{missing}' at the top level{closest(missing, valid)};"
            f" valid keys: {', '.join(valid)}"
        )
    target_path = _node_target(node, where, targets)
    if target_path is not None:  # a component: what its class takes decides
        keys = config_keys(resolve_target(target_path, f"{where}._target_"), path[0])
        if keys is None or missing in keys:
            raise ConfigError(
                f"{key}: not in the {where} config, but {target_path} takes it: add it with {add}"
            )
        raise ConfigError(
            f"{key}: unknown key '{missing}' in {where}{closest(missing, keys)};"
            f" {describe_keys(target_path, keys, path[0])}"
        )
    valid = [str(k) for k in node if not str(k).startswith("_")]
    if not valid:
        raise ConfigError(f"{key}: {where} is empty; to add a key use {add}")
    raise ConfigError(
        f"{key}: unknown key '{missing}' in {where}{closest(missing, valid)};"
        f" valid keys: {', '.join(valid)} (to add a new key: {add})"
    )


def _check_replaced_target(
    cfg: DictConfig,
    override: Override,
    new: str,
    mentioned: list[str],
    choices: dict[str, str],
    source: ConfigSource,
) -> None:
    """Refuse ``group._target_=<class>`` when the group's option was written for another class
    and its keys would silently reach the new one (another agent's ``lr``, ``batch_size``...).

    A subclass of the option's class keeps the option's keys (it takes its parent's settings);
    for any other class, every key of the option must be set or removed on the command line, or
    the run must start from the group's ``custom`` option (``_target_: ???`` and no keys).
    """
    path = override.key_or_group.removesuffix("._target_")
    node = OmegaConf.select(cfg, path)
    if not isinstance(node, DictConfig):
        return
    old = _node_target(node, path, {})
    if old is None or old == new:
        return
    new_class = resolve_target(new, f"{path}._target_")
    old_class = resolve_target(old, f"{path}._target_")
    subclass = isinstance(new_class, type) and isinstance(old_class, type)
    if subclass and issubclass(new_class, old_class):
        return
    inherited = [
        k
        for k in map(str, node)
        if not k.startswith("_")
        and not any(m == f"{path}.{k}" or m.startswith(f"{path}.{k}.") for m in mentioned)
    ]
    if not inherited:
        return
    group = path.split(".")[0]
    option = f"{group}={choices[group]}" if path == group and group in choices else path
    fix = f"set or remove (~{path}.<key>) each"
    if path == group and "custom" in source.catalog.get(group, []):
        fix = (
            f"start from {group}=custom instead ({group}=custom {path}._target_={new}"
            f" +{group}.<key>=<value> ...), or {fix}"
        )
    raise ConfigError(
        f"{path}._target_={new}: it would receive the keys of {option}, meant for {old}:"
        f" {', '.join(inherited)}; {fix}"
    )


def _deletion(cfg: DictConfig, override: Override, text: str) -> list[str]:
    """The override strings that delete ``~key`` (given as ``text``) with Hydra.

    Hydra 1.3 cannot delete a key whose value is null (it reads null as "does not exist",
    facebookresearch/hydra#2829): such a key is first set to a placeholder, then deleted.
    """
    key = override.key_or_group
    node, path, missing = _descend(cfg, key)
    if missing is not None:
        where = ".".join(path) or "the top level"
        valid = [str(k) for k in node] if isinstance(node, DictConfig) else []
        raise ConfigError(f"~{key}: {where} has no key '{missing}'{closest(missing, valid)}")
    if override.value() is None and OmegaConf.select(cfg, key, throw_on_missing=False) is None:
        return [f"{key}=0", text]
    return [text]


@dataclass
class _Entry:
    """One command-line override: what the checks compose with, and what Hydra gets.

    Attributes:
        override: Hydra's parse of it.
        text: the override as given.
        group: whether it picks a config group's option.
        value: its (first) value.
        others: a sweep's other values.
        composed: the override strings the checks compose with (its first value).
        for_hydra: the override strings Hydra gets instead of ``text``.
    """

    override: Override
    text: str
    group: bool = False
    value: str = ""
    others: list[str] = field(default_factory=list)
    composed: list[str] = field(default_factory=list)
    for_hydra: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, override: Override, text: str, source: ConfigSource) -> _Entry:
        """The entry of an override; a group option is checked against ``source`` at once."""
        entry = cls(override, text, for_hydra=[text])
        name = override.key_or_group
        if name == "hydra" or name.startswith(("hydra.", "hydra/")):  # Hydra checks its own
            return entry
        if override.type is OverrideType.DEL:
            entry.composed = [text]
            return entry
        source.refuse_outside(override, text)
        entry.group = name in source.catalog
        values = _check_group(override, source) if entry.group else _values(override)
        if values:  # none: a sweep the sweeper draws (Optuna's interval), not composed here
            entry.value, entry.others = values[0], values[1:]
            entry.composed = [_line(override, entry.value)]
        return entry

    @property
    def is_key(self) -> bool:
        """Whether it sets or adds a key (not a group option, not a deletion)."""
        is_set = self.override.type is not OverrideType.DEL
        return bool(self.composed) and is_set and not self.group


def _check_keys(entries: list[_Entry], source: ConfigSource) -> None:
    """Check the key overrides against the config their group options compose; rewrite, in the
    entries, what Hydra would refuse (see :func:`check_overrides`)."""
    keys = [e for e in entries if e.is_key]
    adds = [line for e in keys if e.override.type is not OverrideType.CHANGE for line in e.composed]
    base = source.compose([*(ln for e in entries if e.group for ln in e.composed), *adds], True)
    choices = {str(k): str(v) for k, v in base.hydra.runtime.choices.items() if v is not None}
    with open_dict(base):
        del base["hydra"]
    resuming = any(  # resume=auto may start fresh: its keys are checked as a fresh run's
        e.override.key_or_group == "resume" and e.value not in ("", "null", "auto") for e in keys
    )
    replaced = [e for e in keys if e.override.key_or_group.endswith("._target_")]
    targets = {e.override.key_or_group.removesuffix("._target_"): e.value for e in replaced}
    mentioned = [e.override.key_or_group for e in entries]
    for entry in replaced:
        for new in [entry.value, *entry.others]:
            _check_replaced_target(base, entry.override, new, mentioned, choices, source)
    for entry in keys:
        key = entry.override.key_or_group
        if entry.override.type is not OverrideType.CHANGE:
            continue
        if not resuming:
            _check_key(base, entry.override, entry.text, targets)
        elif _descend(base, key)[2] is not None:  # prepare() checks it against the saved config
            entry.composed, entry.for_hydra = [f"++{key}={entry.value}"], [f"++{entry.text}"]
    for entry in entries:
        deletion = entry.override.type is OverrideType.DEL
        if deletion and entry.composed and entry.override.key_or_group not in source.catalog:
            entry.composed = entry.for_hydra = _deletion(base, entry.override, entry.text)


def check_overrides(
    overrides: list[str], config_dir: str | None = None, build: bool = True
) -> list[str]:
    """Check a command line's overrides; return the overrides to hand to Hydra.

    Raises :class:`ConfigError` (one line) for an unparsable override, an unknown group option or
    key, a ``_target_`` override that would inherit another class's keys, or (``build``) a bad
    value: with ``build`` every component is built as the run would build it, without starting
    anything; without it (``--cfg``, ``--info``, ``--help``) only the composition is checked, so no
    env or agent is made. Every value of a sweep is checked (with the first value of every other
    override), so that a typo fails at once rather than in the middle of a sweep. ``config_dir``
    (``--config-dir``) and ``hydra.searchpath=[...]`` add a user's own config groups and options.

    The returned overrides equal ``overrides`` except where Hydra would refuse what border
    means: deletions of null keys (see :func:`_deletion`), and a resume's changes to keys of the
    saved config that border's default config lacks (a custom agent's keys): Hydra composes
    the default config first, so those are force-added (``++key=value``) there.
    """
    parsed = parse_overrides(overrides)
    source = ConfigSource.of(parsed, config_dir)
    entries = [_Entry.of(ov, text, source) for ov, text in zip(parsed, overrides, strict=True)]
    composed = _compose_plain(entries, source)
    if composed is None:
        _check_keys(entries, source)
        composed = source.compose([line for e in entries for line in e.composed])
    _validate(composed, [line for e in entries for line in e.composed], build)
    for i, entry in enumerate(entries):  # the other values of each sweep
        for value in entry.others:
            variant = [*entries[:i], replace(entry, composed=[_line(entry.override, value)])]
            variant += entries[i + 1 :]
            try:
                lines = [line for e in variant for line in e.composed]
                _validate(source.compose(lines), lines, build)
            except ConfigError as exc:
                if not entry.group:
                    raise  # the message names the key and its bad value
                name = entry.override.key_or_group
                raise ConfigError(f"with {name}={value}: {exc}") from None
    return [line for e in entries for line in e.for_hydra]


def _compose_plain(entries: list[_Entry], source: ConfigSource) -> DictConfig | None:
    """The config the overrides compose when none needs rewriting (no deletion, no ``_target_``
    replaced, no ``resume=``): Hydra accepting every key then says all :func:`_check_keys` would,
    in one composition instead of two. None when they need the key checks (which also word
    Hydra's refusals)."""
    for entry in entries:
        key = entry.override.key_or_group
        if entry.override.type is OverrideType.DEL or key == "resume" or key.endswith("._target_"):
            return None
    try:
        return source.compose([line for e in entries for line in e.composed])
    except Exception:  # any refusal: the key checks word it
        return None


def _validate(cfg: DictConfig, overrides: list[str], build: bool) -> None:
    """With ``build``, validate ``cfg`` (``overrides`` composed) and build every component as a
    run would."""
    if build:
        if cfg.get("resume") == "auto":  # a multirun's jobs settle it: check it as a fresh run
            cfg.resume = None
        prepare(cfg, overrides=overrides)
