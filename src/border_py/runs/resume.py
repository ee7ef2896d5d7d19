"""Resuming a run: its saved config with the new overrides, and what must not change."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.types import OverrideType
from omegaconf import DictConfig, OmegaConf

from border_py.config import GROUPS, OVERLAYS, flatten, lookup, require
from border_py.errors import ConfigError, printable
from border_py.files import read_record
from border_py.layout import BUFFER_NPZ, CONFIG, HYDRA, HYDRA_OVERRIDES
from border_py.overrides import parse_overrides, set_key, to_plain
from border_py.resources import memory
from border_py.runs.checkpoint import Checkpoint
from border_py.runs.replay_snapshot import snapshot_nbytes
from border_py.runs.results import read_result
from border_py.runs.run_dir import claimed_overrides
from border_py.runs.timeline import run_dir_of_checkpoint
from border_py.runs.trust import CALLERS, Trust, literal
from border_py.secrets import redact, refuse_redacted

__all__ = [
    "check_fits",
    "check_resume_memory",
    "original_overrides",
    "resumed_config",
    "without_user_settings",
]

log = logging.getLogger(__name__)

NOT_CARRIED = ("resume", "run_dir", "trust")  # keys of this command, never from the saved config
# Settings that protect the user come from the user: where a run's data goes and which checks run
# are never taken from a saved config. Each is dropped from it (but SAFE_VALUES), so that this
# command's value (its command line, else the shipped default: a W&B mode of null reads
# WANDB_MODE) decides. Found by
# ``_target_`` at any depth and under any name (a recorder may be saved as ``recorder.<anything>``,
# or alone, as configs of earlier versions hold it); None: top-level keys. At the keys of trust's
# CALLERS (``recorder.mlflow.tracking_uri``) a saved value is refused unless given again instead.
USER_SETTINGS: dict[str | None, tuple[str, ...]] = {
    None: ("check_resources",),
    "border_py.recorders.wandb.WandbRecorder": ("mode", "entity", "project"),
    "border_py.recorders.mlflow.MlflowRecorder": ("tracking_uri",),
}
# Saved values of USER_SETTINGS that are kept, unless this command gives its own: they only keep
# data in, stricter than any default (W&B recording to the run dir only, or nothing), so a resume
# of one's own offline run stays offline whatever WANDB_MODE says.
SAFE_VALUES: dict[str | None, dict[str, tuple[str, ...]]] = {
    "border_py.recorders.wandb.WandbRecorder": {"mode": ("offline", "disabled")},
}


def without_user_settings(saved: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``saved`` without its :data:`USER_SETTINGS` (but their :data:`SAFE_VALUES`), and every
    user setting it held, kept or not (dotted key -> value)."""
    held: dict[str, Any] = {}

    def drop(node: Any, path: str) -> Any:
        if isinstance(node, list):
            return [drop(value, f"{path}.{i}") for i, value in enumerate(node)]
        if not isinstance(node, dict):
            return node
        target = node.get("_target_")
        if not path:
            target = None  # the top level's own settings
        elif not isinstance(target, str):
            return {key: drop(value, f"{path}.{key}") for key, value in node.items()}
        mine, safe = USER_SETTINGS.get(target, ()), SAFE_VALUES.get(target, {})
        out = {}
        for key, value in node.items():
            dotted = f"{path}.{key}" if path else str(key)
            if key not in mine or dotted in CALLERS:
                out[key] = drop(value, dotted)
                continue
            held[dotted] = value
            if value in safe.get(key, ()):
                out[key] = value
        return out

    return drop(saved, ""), held


def original_overrides(run_dir: Path) -> list[str]:
    """The command-line overrides the run started with: recorded in its claim (``.border_run``),
    else (runs from before that record) ``.hydra/overrides.yaml``, else ``result.json``'s."""
    claimed = claimed_overrides(run_dir)
    if claimed is not None:
        return claimed
    with contextlib.suppress(OSError, yaml.YAMLError):
        listed = yaml.safe_load(read_record(run_dir / HYDRA / HYDRA_OVERRIDES))
        if isinstance(listed, list):  # Hydra's: a list of strings (nothing else is read)
            return [o for o in listed if isinstance(o, str)]
    return [o for o in (read_result(run_dir) or {}).get("overrides", []) if "(resume)" not in o]


def resumed_config(
    checkpoint: Checkpoint,
    overrides: list[str],
    trust: Trust | None = None,
    command: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The checkpoint's saved config with the command line's ``key=value`` overrides on top.

    Config groups cannot change on resume (the state would not fit): a ``group=option`` override
    is accepted only as the run's own original choice (a requeued job repeats its command line).
    :data:`USER_SETTINGS` are never taken from the saved config: the command's own values are
    (those of its config at the same keys, and its overrides), else the components' defaults
    (but a saved one of :data:`SAFE_VALUES`: W&B's ``offline`` or ``disabled`` mode).
    Every difference is logged. The saved config is data: its strings are never resolved as
    interpolations, and what it imports must be trusted (see :mod:`border_py.runs.trust`).

    Args:
        checkpoint: the checkpoint to continue from.
        overrides: the command line's overrides.
        trust: what the resuming command trusts (default: only border-py's and gymnasium's own
            components).
        command: the resuming command's own config (composed from its command line, or given to
            :func:`border_py.train`): where :data:`USER_SETTINGS` come from besides
            ``overrides``.

    Raises:
        ConfigError: one line: a group changed, a sweep, a deletion, or an untrusted import.
    """
    trust = trust or Trust()
    saved, held = without_user_settings(
        {k: v for k, v in checkpoint.config.items() if k not in NOT_CARRIED}
    )
    merged = OmegaConf.create(literal(saved))
    for key in [*held, *USER_SETTINGS[None]]:  # the command's own value, where it has one
        if lookup(command or {}, key) is not None:
            set_key(merged, key, literal(lookup(command or {}, key)), add=True)
    _apply(merged, overrides, run_dir_of_checkpoint(checkpoint.path))
    config = to_plain(merged)
    trust.check(config, checkpoint.path / CONFIG)
    _log_changes(saved, held, config)
    refuse_redacted(config)  # a secret saved as *** must be given again
    return config | {
        "resume": str(checkpoint.path),
        "run_dir": str(run_dir_of_checkpoint(checkpoint.path)),
        "trust": list(trust.entries),
    }


def _apply(merged: DictConfig, overrides: list[str], run_dir: Path) -> None:
    """Set ``overrides`` in ``merged`` (a resumed run's config, of ``run_dir``): keys only; a
    group only as the run's original choice (see :func:`resumed_config`)."""
    parsed = parse_overrides(overrides)
    original = set(original_overrides(run_dir))
    for ov in parsed:
        key = ov.key_or_group
        if key in NOT_CARRIED or key.startswith("hydra"):
            continue
        if key in GROUPS or key in OVERLAYS:
            if ov.input_line in original:
                continue
            raise ConfigError(
                f"{key}={ov.get_value_element_as_str()}: config groups cannot change when resuming;"
                f" override keys instead (e.g. trainer.max_opts=...)"
            )
        if ov.is_sweep_override():
            raise ConfigError(f"{key}: sweeps cannot resume a run")
        if ov.type is OverrideType.DEL:
            raise ConfigError(f"~{key}: keys cannot be deleted when resuming")
        set_key(merged, key, ov.value(), add=ov.type is not OverrideType.CHANGE)


def _log_changes(saved: dict[str, Any], held: dict[str, Any], config: dict[str, Any]) -> None:
    """Log every key the resumed ``config`` changes from the ``saved`` one, and each saved user
    setting (``held``) that is not used (redacted: no secrets; the keys escaped, as their
    values are by ``%r``: a saved key name is text from a file, whatever handler prints it)."""
    before, after = flatten(redact(saved)), flatten(redact(config))
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            log.info(
                "resume: %s changed from %r to %r", printable(key), before.get(key), after.get(key)
            )
    for key, value in sorted(redact(held).items()):
        if value is not None and value != lookup(redact(config), key):
            log.warning(
                "resume: the saved %s=%r is not used: where a run's data goes and which checks"
                " run come from this command line (give it again to keep it)",
                printable(key),
                value,
            )


def check_fits(checkpoint: Checkpoint, config: dict[str, Any], enforce: bool) -> None:
    """Refuse resume overrides that the checkpoint's state cannot follow (``enforce``: the run's
    ``check_resources``, for the memory its saved replay buffer takes)."""
    fixed = ["agent.n_step", "replay_buffer.frame_stack"]  # pending windows, stored frames
    if checkpoint.state.serial:  # the saved envs are restored one by one
        fixed += ["actor_manager.n_envs_per_actor", "replay_buffer.priority_from_actors"]
    for key in fixed:
        before, after = lookup(checkpoint.config, key), lookup(config, key)
        if before != after:
            raise ConfigError(
                f"{key}={after}: cannot change when resuming (the checkpoint has {before})"
            )
    if checkpoint.meta.get("replay_buffer"):
        size = int(checkpoint.state.replay["size"])
        capacity = lookup(config, "replay_buffer.capacity")
        require(
            "replay_buffer.capacity",
            capacity >= size,
            f">= {size}, the transitions the checkpoint holds",
            capacity,
        )
        saved = lookup(checkpoint.config, "replay_buffer.capacity")
        if lookup(config, "replay_buffer.frame_stack") and capacity < saved:
            raise ConfigError(
                f"replay_buffer.capacity={capacity}: must stay >= {saved} when resuming with saved"
                " frames (their ring is sized from the capacity)"
            )
        check_resume_memory(checkpoint, capacity, enforce)


def check_resume_memory(checkpoint: Checkpoint, capacity: int, enforce: bool) -> None:
    """Bound the memory that restoring ``checkpoint``'s saved replay buffer takes (before any of it
    is read): the buffer holds at least the saved arrays' bytes, and an older ``.npz`` snapshot is
    read whole beside it (the build of the buffer bounds its full ``capacity`` too, where its
    class can estimate that)."""
    saved, whole = snapshot_nbytes(checkpoint.path)
    memory(
        f"replay_buffer.capacity={capacity}",
        f"resuming {checkpoint.path}'s replay buffer"
        + (f" (its {BUFFER_NPZ} read whole beside the buffer)" if whole else ""),
        2 * saved if whole else saved,
        enforce,
        "free memory or resume on a machine with more",
    )
