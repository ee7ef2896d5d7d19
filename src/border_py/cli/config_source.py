"""The configs ``border train`` composes: border's own plus a user's config dirs or packages,
with the catalog of their config groups and options that the override checks
(:mod:`border_py.cli.checks`) test group overrides against. A group's bases (``trainer/_loop``:
keys its options share, :func:`~border_py.config.is_base`) are no options, and the groups shipped
for another command (:data:`OTHER_COMMANDS`: ``tune/``) are no groups of ``border train``: the
catalog leaves them out, and so do Hydra's own lists (``--help``, tab completion) once
:func:`hide_from_listings` ran."""

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
from hydra.core.override_parser.types import Override, OverrideType
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from border_py.cli.errors import hydra_error_line
from border_py.config import closest, config_dir, is_base
from border_py.errors import ConfigError

__all__ = ["OTHER_COMMANDS", "ConfigSource", "hide_from_listings"]

# config groups shipped beside border train's for another command: group -> that command
OTHER_COMMANDS = {"tune": "border tune"}


def hide_from_listings() -> None:
    """Leave the groups' bases out of every list of a group's options Hydra makes (``--help``'s
    config groups, shell completion, a ``group=glob(*)`` sweep), and the groups of
    :data:`OTHER_COMMANDS` out of its lists of groups (once per process; composing is
    untouched, so an option's ``defaults:`` still loads its base and ``border tune`` its
    space)."""
    listing = ConfigLoaderImpl.get_group_options
    if getattr(listing, "hides", False):
        return

    def options(
        self: ConfigLoaderImpl,
        group_name: str,
        results_filter: ObjectType | None = ObjectType.CONFIG,
        *args: Any,
        **kwargs: Any,
    ) -> list[str]:
        found = listing(self, group_name, results_filter, *args, **kwargs)
        others = OTHER_COMMANDS if group_name == "" and results_filter != ObjectType.CONFIG else {}
        return [o for o in found if not is_base(o) and o not in others]

    options.hides = True  # type: ignore[attr-defined]
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

            groups = options("", ObjectType.GROUP)
            return {
                group: options(group, ObjectType.CONFIG)
                for group in groups
                if group != "hydra" and group not in OTHER_COMMANDS
            }

    @cached_property
    def top_keys(self) -> list[str]:
        """The keys of ``border train``'s primary config beside its groups (``seed``, ``run_dir``,
        ...), in order."""
        primary = OmegaConf.load(config_dir() / "train.yaml")
        return [str(k) for k in primary if k not in ("defaults", "hydra")]

    def refuse_outside(self, override: Override, text: str) -> None:
        """Refuse an override (given as ``text``) of what is no part of ``border train``'s
        config: a group of another command (``tune=dqn_cartpole``, ``+tune=...``), or ``+key``
        under a top-level name that is neither a group nor a key of the config, which no run
        reads (Hydra's ``+`` stays for keys inside a group: ``+env.kwargs.<name>=<value>``).

        Raises:
            ConfigError: one line naming the override and what is allowed instead.
        """
        top = override.key_or_group.replace("/", ".").split(".")[0]
        command = OTHER_COMMANDS.get(top)
        if command is not None:
            whole_group = override.key_or_group == top and not override.is_sweep_override()
            value = override.get_value_element_as_str() if whole_group else "<name>"
            raise ConfigError(
                f"{text}: {top}/ holds the configs of {command}, not a border train group;"
                f" run: {command} {value}"
            )
        groups, keys = list(self.catalog), self.top_keys
        adding = override.type in (OverrideType.ADD, OverrideType.FORCE_ADD)
        if not adding or top in groups or top in keys:
            return
        raise ConfigError(
            f"{text}: unknown top-level key '{top}'{closest(top, [*groups, *keys])}; + adds keys"
            f" inside a group (e.g. +env.kwargs.<name>=<value>); groups: {', '.join(groups)};"
            f" keys: {', '.join(keys)}"
        )
