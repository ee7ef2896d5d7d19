"""A search space: ``tune/<name>.yaml`` found on Hydra's search path, its keys and params checked
(one :class:`~border_py.errors.ConfigError` line per mistake), and a trial's config composed and
validated at the corners of the space before any trial starts."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from border_py.config import build, closest, config_dir, positive, positive_count, require
from border_py.errors import ConfigError, first_line

__all__ = [
    "SearchSpace",
    "check_n_jobs",
    "check_space",
    "compose_train",
    "last_wins",
    "load_space",
    "override",
    "search_path",
]

TYPES = ("float", "int", "categorical")  # a param's Trial.suggest_<type>
SPACE_KEYS = ("study_name", "n_trials", "n_jobs", "sampler", "pruner", "overrides", "params")


@dataclass
class SearchSpace:
    """A checked search space (see :mod:`border_py.tuning` and ``conf/tune/dqn_cartpole.yaml``)."""

    name: str
    study_name: str
    n_trials: int = 20
    n_jobs: int | str = "auto"
    sampler: dict[str, Any] | None = None
    pruner: dict[str, Any] | None = None
    overrides: list[str] = field(default_factory=list)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)


def search_path(config_dirs: list[str]) -> list[str]:
    """Hydra search-path entries for ``--config-dir`` values (``pkg://...`` kept as is)."""
    entries = []
    for entry in config_dirs:
        if entry.startswith(("pkg://", "file://")):
            entries.append(entry)
            continue
        path = Path(entry).expanduser().resolve()
        if not path.is_dir():
            raise ConfigError(f"--config-dir {entry}: no such directory")
        entries.append(f"file://{path}")
    return entries


def compose_train(overrides: list[str], entries: list[str]) -> Any:
    """The ``train`` config with ``overrides`` and the extra search path; one-line errors."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import OmegaConfBaseException

    extra = [f"hydra.searchpath=[{','.join(entries)}]"] if entries else []
    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir()), job_name="tune"):
        try:
            return compose("train", overrides=[*extra, *overrides])
        except MissingConfigException as exc:
            missing = exc.missing_cfg_file or ""
            group, _, option = missing.rpartition("/")
            options = list(exc.options or [])
            raise ConfigError(
                f"{group}={option}: no such option{closest(option, options)}; choose from:"
                f" {', '.join(options) or 'none'}"
            ) from None
        except (HydraException, OmegaConfBaseException) as exc:
            raise ConfigError(first_line(exc)) from None


def load_space(name: str, entries: list[str]) -> SearchSpace:
    """Find ``tune/<name>.yaml`` on the search path (border-py's configs, then your
    ``--config-dir`` entries: give yours their own names) and check it: one
    :class:`ConfigError` line per mistake."""
    from border_py.overrides import to_plain

    raw = to_plain(compose_train([f"+tune={name}"], entries)).get("tune")
    where = f"tune/{name}.yaml"
    require(where, isinstance(raw, dict), "a mapping of search settings", raw)
    assert isinstance(raw, dict)
    for key in raw:
        if key not in SPACE_KEYS:
            raise ConfigError(
                f"{where}: unknown key {key!r}{closest(str(key), SPACE_KEYS)}; keys:"
                f" {', '.join(SPACE_KEYS)}"
            )
    space = SearchSpace(name=where, study_name=str(raw.get("study_name") or name))
    space.n_trials = raw.get("n_trials", space.n_trials)
    positive(f"{where}: n_trials", space.n_trials, int)
    space.n_jobs = raw.get("n_jobs", space.n_jobs)
    check_n_jobs(f"{where}: n_jobs", space.n_jobs)
    for key in ("sampler", "pruner"):
        spec = raw.get(key)
        ok = spec is None or (isinstance(spec, dict) and "_target_" in spec)
        require(f"{where}: {key}", ok, "null or a mapping with a '_target_'", spec)
        setattr(space, key, spec)
    overrides = raw.get("overrides") or []
    ok = isinstance(overrides, list) and all(isinstance(o, str) for o in overrides)
    require(f"{where}: overrides", ok, "a list of key=value strings", overrides)
    space.overrides = list(overrides)
    params = raw.get("params") or {}
    require(
        f"{where}: params", isinstance(params, dict) and bool(params), "a non-empty mapping", params
    )
    for key, spec in params.items():
        space.params[str(key)] = check_param(f"{where}: params.{key}", spec)
    return space


def last_wins(overrides: list[str]) -> list[str]:
    """``overrides`` with one entry per key, the last one given (as Hydra would apply them)."""
    last = {o.split("=", 1)[0]: i for i, o in enumerate(overrides)}
    return [o for i, o in enumerate(overrides) if last[o.split("=", 1)[0]] == i]


def check_n_jobs(key: str, value: Any) -> None:
    """``n_jobs``: a positive int or ``auto``."""
    require(key, value == "auto" or positive_count.ok(value), "a positive int or 'auto'", value)


def check_param(key: str, spec: Any) -> dict[str, Any]:
    """One param: ``{type: float|int|categorical, <arguments of Trial.suggest_<type>>}``."""
    import optuna

    require(
        key, isinstance(spec, dict), "a mapping like {type: float, low: 1e-4, high: 1e-2}", spec
    )
    kind = spec.get("type")
    require(f"{key}.type", kind in TYPES, f"one of {', '.join(TYPES)}", kind)
    method = getattr(optuna.trial.Trial, f"suggest_{kind}")
    params = [p for p in inspect.signature(method).parameters if p not in ("self", "name")]
    arguments = {k: v for k, v in spec.items() if k != "type"}
    for name in arguments:
        if name not in params:
            raise ConfigError(
                f"{key}.{name} is not an argument of Trial.suggest_{kind}{closest(name, params)};"
                f" arguments: {', '.join(params)}"
            )
    try:  # Optuna checks the ranges (low <= high, log needs low > 0, ...)
        getattr(optuna.create_study().ask(), f"suggest_{kind}")("x", **arguments)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{key}: {first_line(exc)}") from None
    return dict(spec)


def corners(spec: dict[str, Any]) -> list[Any]:
    """The values of a param that a check of the search space tries: its bounds or choices."""
    if spec["type"] == "categorical":
        return list(spec["choices"])
    return [spec["low"], spec["high"]]


def override(key: str, value: Any) -> str:
    """``key=value`` in Hydra's syntax (``true``/``false``/``null`` for Python's)."""
    if isinstance(value, bool):
        return f"{key}={str(value).lower()}"
    return f"{key}={'null' if value is None else value}"


def check_space(space: SearchSpace, overrides: list[str], entries: list[str]) -> dict[str, Any]:
    """Compose and validate a trial's config at each param's bounds or choices (the others at
    their first); build the sampler and pruner once. Returns the config at the first corner."""
    from border_py.overrides import to_plain
    from border_py.trainers.train import prepare

    first = {name: corners(spec)[0] for name, spec in space.params.items()}
    variants = [first] + [
        first | {name: value} for name, spec in space.params.items() for value in corners(spec)[1:]
    ]
    for values in variants:
        params = [override(k, v) for k, v in values.items()]
        try:
            prepare(compose_train([*overrides, *params], entries), overrides=[])
        except ConfigError as exc:
            raise ConfigError(f"with {' '.join(params)}: {exc}") from None
    if space.sampler is not None:
        build(f"{space.name}: sampler", space.sampler)
    if space.pruner is not None:
        build(f"{space.name}: pruner", space.pruner)
    return to_plain(
        compose_train([*overrides, *(override(k, v) for k, v in first.items())], entries)
    )
