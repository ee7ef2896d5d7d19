"""Where W&B sends a border run, and with what: the user's settings, never a working dir's.

W&B (0.31) reads its settings from two files when it starts in a process: the user's global one
(``$WANDB_CONFIG_DIR/settings``, else ``~/.config/wandb/settings``) and a workspace one in the
working dir (``.wandb/settings`` if ``.wandb`` is there, else ``wandb/settings``; no parent dir is
looked at, and ``WANDB_DIR`` does not move it), the workspace's over the global's, and the
environment's ``WANDB_*`` over both. A workspace file may set any of W&B's settings: ``base_url``
(where the run goes, with the user's API key), ``api_key``, proxies, extra HTTP headers,
``insecure_disable_ssl``. A working dir may be one the user received (a run, a sweep, a folder
holding them), so border guards W&B twice:

- :func:`pinned`: the settings that say where the run goes and how it gets there are passed to
  ``wandb.init``, whose settings win over every file's, from the user's own environment or global
  file (else W&B's defaults): ``base_url``, ``insecure_disable_ssl``, extra HTTP headers and
  the user's own proxies;
- :func:`refuse_workspace_settings`: a workspace file is refused when it lies in the run or sweep
  dir, or in a dir of runs (it is data), and anywhere when it sets more than W&B's own commands
  write there (``entity``, ``mode``, ``project``: ``wandb init``, ``wandb offline``).
"""

from __future__ import annotations

import configparser
import os
from pathlib import Path
from typing import Any

from border_py.errors import ConfigError, first_line, printable
from border_py.files import present, read_record
from border_py.layout import CLAIM, HYDRA, MULTIRUN, WANDB

__all__ = ["pinned", "refuse_workspace_settings"]

SECTION = "default"  # the one section W&B reads in a settings file
WORKSPACE_KEYS = ("entity", "mode", "project")  # what W&B's own commands write in a workspace
# where the run goes and how, with the value pinned when the user sets none (None: W&B's default;
# a proxy has none to pin, W&B skips a None: a workspace file setting one is refused instead)
PINNED: dict[str, Any] = {
    "base_url": None,
    "insecure_disable_ssl": False,
    "x_extra_http_headers": {},
    "http_proxy": None,
    "https_proxy": None,
}
RUNS_MARKS = (CLAIM, HYDRA, MULTIRUN)  # what a run's dir, or a sweep's, holds (names of its own)


def global_settings() -> dict[str, str]:
    """The user's global W&B settings (``$WANDB_CONFIG_DIR/settings``, else
    ``~/.config/wandb/settings``), as W&B reads them; empty when there is none."""
    config_dir = os.environ.get("WANDB_CONFIG_DIR")
    where = Path(config_dir) if config_dir else Path("~", ".config", "wandb")
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(where.expanduser() / "settings")
        return dict(parser.items(SECTION)) if parser.has_section(SECTION) else {}
    except (OSError, configparser.Error):  # W&B reads such a file as empty too
        return {}


def pinned() -> dict[str, Any]:
    """The settings of :data:`PINNED` as the user set them (``WANDB_<KEY>``, or
    ``WANDB__<KEY>`` for an ``x_`` one, else the global settings file), else W&B's defaults: for
    ``wandb.Settings``, passed to ``wandb.init``."""
    import wandb

    found, defaults = global_settings(), wandb.Settings()  # a Settings() reads no file
    chosen = {}
    for key, default in PINNED.items():
        env = f"WANDB__{key[2:].upper()}" if key.startswith("x_") else f"WANDB_{key.upper()}"
        value = os.environ.get(env) or found.get(key)
        if value is None:
            value = getattr(defaults, key) if default is None else default
        if value is not None:
            chosen[key] = value
    return chosen


def refuse_workspace_settings(run_dir: Path, sweep_dir: Path | None) -> None:
    """Refuse the W&B workspace settings of the working dir (``.wandb/settings``,
    ``wandb/settings``; both looked at) when they are data, or set more than W&B's own commands
    write there (see the module's docstring).

    Args:
        run_dir: the run's dir.
        sweep_dir: its sweep's dir, for a job of a multirun (else None).

    Raises:
        ConfigError: one line naming the file and what it sets.
    """
    cwd = Path.cwd().resolve()
    handed = [d.resolve() for d in (run_dir, sweep_dir) if d is not None]
    of_runs = any(cwd.is_relative_to(d) for d in handed) or any(
        os.path.lexists(cwd / mark) for mark in RUNS_MARKS
    )
    for settings in (cwd / ".wandb" / "settings", cwd / WANDB / "settings"):
        if not os.path.lexists(settings):
            continue
        if of_runs:
            raise ConfigError(
                f"{settings}: W&B would take its settings (where it sends the run, with your API"
                " key) from this file of a run or sweep dir; start border from another dir"
            )
        extra = sorted(set(_keys(settings)) - set(WORKSPACE_KEYS))
        if extra:
            raise ConfigError(
                f"{settings}: sets {printable(', '.join(extra))}, which W&B would take from the"
                " working dir (base_url: where it sends the run, with your API key); border"
                f" accepts only {', '.join(WORKSPACE_KEYS)} there (what W&B's own commands write):"
                " set the others in your global settings (wandb login --host=...) or WANDB_*"
                " variables"
            )


def _keys(settings: Path) -> list[str]:
    """The keys W&B would read from the settings file ``settings`` (never through a link).

    Raises:
        ConfigError: it cannot be read as one (a link, not a regular file, not INI text).
    """
    present(settings)  # a link, a FIFO: refused in one line
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(read_record(settings).decode("utf-8", errors="surrogateescape"))
    except (OSError, configparser.Error) as exc:
        raise ConfigError(
            f"{settings}: cannot be read as W&B's settings ({printable(first_line(exc))});"
            " border looks at what W&B would take from it: fix or remove it"
        ) from None
    return [key for key, _ in parser.items(SECTION)] if parser.has_section(SECTION) else []
