"""Hydra's side of the config: override syntax, OmegaConf updates, resolution to plain data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from border_py.errors import ConfigError, first_line

__all__ = ["parse_overrides", "set_key", "to_plain"]


def to_plain(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """Resolve interpolations and return plain dicts/lists, safe to pickle into child processes."""
    if isinstance(cfg, DictConfig):
        try:
            return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)  # type: ignore[return-value]
        except MissingMandatoryValue as exc:
            key = exc.full_key
            raise ConfigError(f"{key} must be set (e.g. {key}=...)") from None
        except OmegaConfBaseException as exc:
            raise ConfigError(first_line(exc)) from None
    return dict(cfg)


def parse_overrides(overrides: list[str]) -> list[Override]:
    """Hydra's parse of ``key=value`` overrides; a syntax error becomes one :class:`ConfigError` line."""
    try:
        return OverridesParser.create().parse_overrides(overrides)
    except HydraException as exc:
        raise ConfigError(first_line(exc)) from None


def set_key(cfg: DictConfig, key: str, value: Any, add: bool) -> None:
    """``cfg.<key> = value`` (``add``: the key may be new); an OmegaConf error becomes one line."""
    try:
        OmegaConf.update(cfg, key, value, force_add=add)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"{key}: {first_line(exc)}") from None
