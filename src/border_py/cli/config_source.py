"""The configs ``border train`` composes: border's own plus a user's config dirs or packages,
with the catalog of their config groups and options that the override checks
(:mod:`border_py.cli.checks`) test group overrides against. A group's bases (``trainer/_loop``:
keys its options share, :func:`~border_py.config.is_base`) are no options: the catalog leaves them
out, and so do Hydra's own lists once :func:`hide_bases` ran."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.global_hydra import GlobalHydra
from hydra.core.object_type import ObjectType
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from border_py.cli.errors import hydra_error_line
from border_py.config import config_dir, is_base
from border_py.errors import ConfigError

__all__ = ["ConfigSource", "hide_bases"]


def hide_bases() -> None:
    """Leave the groups' bases out of every list of a group's options Hydra makes: ``--help``'s
    config groups, shell completion, a ``group=glob(*)`` sweep (once per process; composing is
    untouched, so an option's ``defaults:`` still loads its base)."""
    listing = ConfigLoaderImpl.get_group_options
    if getattr(listing, "hides_bases", False):
        return

    def options(self: ConfigLoaderImpl, *args: Any, **kwargs: Any) -> list[str]:
        return [o for o in listing(self, *args, **kwargs) if not is_base(o)]

    options.hides_bases = True  # type: ignore[attr-defined]
    ConfigLoaderImpl.get_group_options = options  # type: ignore[method-assign]


def _check_available(entry: str) -> None:
    """Raise :class:`ConfigError` unless a search-path entry names configs Hydra can read (as
    Hydra decides: a ``file://`` directory, or a ``pkg://`` package with an ``__init__.py``)."""
    scheme, sep, where = entry.partition("://")
    if not sep:
        scheme, where = "file", entry
    if scheme == "file" and not Path(where).is_dir():
        raise ConfigError(f"hydra.searchpath: {entry} is not a directory")
    if scheme == "pkg":
        package = where.replace("/", ".").rstrip(".")
        try:
            found = (resources.files(package) / "__init__.py").is_file()
        except (ValueError, ModuleNotFoundError, TypeError):
            found = False
        if not found:
            raise ConfigError(
                f"hydra.searchpath: {entry} is not an importable package with an __init__.py"
                " (install it, or put its parent dir on PYTHONPATH)"
            )


@dataclass(frozen=True)
class ConfigSource:
    """The configs ``border train`` composes: the shipped ones plus a user's own config dirs or
    packages (``--config-dir DIR``, ``hydra.searchpath=[pkg://my_pkg.conf]``), which Hydra
    searches after the shipped ones. Their options are checked like the shipped ones.

    Args:
        searchpath: Hydra search-path entries (``file://...``, ``pkg://...``) beyond border's own.
    """

    searchpath: tuple[str, ...] = ()

    @classmethod
    def of(cls, overrides: list[Override], config_dir: str | None = None) -> ConfigSource:
        """The source a command line names (``--config-dir`` and ``hydra.searchpath=``)."""
        entries = []
        if config_dir is not None:
            path = Path(config_dir).expanduser().absolute()
            if not path.is_dir():
                raise ConfigError(f"--config-dir {config_dir}: not a directory")
            entries.append(f"file://{path}")
        for ov in overrides:
            if ov.key_or_group != "hydra.searchpath":
                continue
            value = ov.value()
            if not (isinstance(value, list) and all(isinstance(e, str) for e in value)):
                raise ConfigError(
                    f"{ov.input_line}: must be a list, e.g. hydra.searchpath=[pkg://my_pkg.conf]"
                )
            for entry in value:
                _check_available(entry)
            entries.extend(value)
        return cls(tuple(entries))

    def overrides(self) -> list[str]:
        """The ``hydra.searchpath=[...]`` override that composes with this source."""
        if not self.searchpath:
            return []
        quoted = ", ".join(
            "'" + e.replace("\\", "\\\\").replace("'", "\\'") + "'" for e in self.searchpath
        )
        return [f"hydra.searchpath=[{quoted}]"]

    def compose(self, overrides: list[str], hydra: bool = False) -> DictConfig:
        """The ``train`` config with ``overrides`` (``hydra``: with its ``hydra`` node), Hydra's
        errors as one :class:`ConfigError` line."""
        with initialize_config_dir(
            version_base="1.3", config_dir=str(config_dir()), job_name="check"
        ):
            try:
                return compose(
                    config_name="train",
                    overrides=[*self.overrides(), *overrides],
                    return_hydra_config=hydra,
                )
            except (HydraException, OmegaConfBaseException) as exc:
                raise ConfigError(hydra_error_line(exc)) from None

    @cached_property
    def catalog(self) -> dict[str, list[str]]:
        """Config group -> its options, across the whole search path (Hydra's own groups left out)."""
        with initialize_config_dir(
            version_base="1.3", config_dir=str(config_dir()), job_name="check"
        ):
            loader = GlobalHydra.instance().config_loader()
            # one repository over the search path (with hydra.searchpath) for every group: what
            # ``get_group_options`` builds anew, loading the primary config, at each call
            _, repo = loader._parse_overrides_and_create_caching_repo(  # type: ignore[attr-defined]
                "train", self.overrides()
            )

            def options(group: str, kind: ObjectType) -> list[str]:
                found = repo.get_group_options(group, results_filter=kind)
                return sorted(o for o in found if not is_base(o))

            groups = [g for g in options("", ObjectType.GROUP) if g != "hydra"]
            return {group: options(group, ObjectType.CONFIG) for group in groups}
