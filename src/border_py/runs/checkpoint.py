"""A checkpoint in ``<run dir>/checkpoints/``: written atomically, loaded without pickle (which
checkpoints a run has, and which one a path names: :mod:`border_py.runs.timeline`).

A checkpoint directory (``best`` or the opt steps zero-padded to 9 digits) holds:

- ``policy.pt``: the acting weights alone (usable without border-py's training state);
- ``agent.pt``: the agent's full state (networks, targets, optimizers, counters, exploration RNG);
- ``trainer.pt``: the trainer's state (counters, best eval so far, RNG states, envs, actors);
- ``config.json``: the resolved config of the run; ``meta.json``: facts for people;
- ``replay_buffer/``: the replay buffer's arrays, with ``trainer.save_replay_buffer``: one
  ``<name>.npy`` per array (``obs``, ``action``, ..., ``priority``, ``frame_pixels``, ...; only
  the filled rows) and ``arrays.json``, their dtypes and shapes; the buffer's position and RNG
  are in ``trainer.pt`` (see :mod:`border_py.runs.replay_snapshot`). Checkpoints of earlier
  versions hold ``replay_buffer.npz`` instead, which is still read.

Everything is written into a hidden temporary directory that is renamed into place, so a reader
(or a resume after ``kill -9``) never sees a half-written checkpoint; every file, and every dir,
is fsynced before that rename. ``.pt`` files load with ``torch.load(weights_only=True)`` once
their zip directory says they hold no more than their own size (:mod:`~border_py.runs.pt_files`);
the buffer's files are memory-mapped (``numpy.load(path, mmap_mode="r")`` reads one too), never
unpickled. Saving streams each of the buffer's arrays from its storage into its file and resuming
copies each mapped file into the new buffer's storage chunk by chunk, so neither holds a second
copy of the buffer in memory: the process peaks at about one buffer (plus 64 MiB).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from border_py.errors import ConfigError, RunError, first_line
from border_py.files import create_file, make_dir, read_json
from border_py.layout import AGENT, BEST, CHECKPOINTS, CONFIG, META, POLICY, TRAINER
from border_py.publishing import publish_dir
from border_py.runs.compat import current_config
from border_py.runs.pt_files import load_pt
from border_py.runs.replay_snapshot import read_snapshot, write_snapshot
from border_py.runs.state import TrainerState
from border_py.runs.timeline import find_checkpoint, is_complete

__all__ = ["Checkpoint", "load_checkpoint", "pick_checkpoint", "recover", "save_checkpoint"]

CONFIG_KEYS = ("seed", "env", "agent")  # what every saved config holds (border eval builds them)


def save_checkpoint(
    root: Path,
    name: str,
    *,
    policy: dict[str, torch.Tensor],
    agent_state: dict[str, Any],
    state: TrainerState,
    config: dict[str, Any],
    meta: dict[str, Any],
    buffer: dict[str, np.ndarray] | None = None,
) -> Path:
    """Write ``root/name/`` atomically (replacing an older one) and return its path.

    The dir is published whole (:func:`border_py.publishing.publish_dir`: written into a hidden
    temporary dir, every file and dir fsynced before the rename, the parent after it): a crash or
    power loss leaves the old checkpoint or the new one, never a torn one. Files and dirs get the
    umask's modes (see :mod:`border_py.files`).

    Raises:
        RunError: a file could not be written (disk full, permissions, a file size limit); the
            earlier checkpoints are intact and no temporary dir is left.
        ConfigError: ``root`` is a symlink.
    """

    def fill(tmp: Path) -> None:
        create_file(tmp / POLICY, lambda f: torch.save(policy, f))
        create_file(tmp / AGENT, lambda f: torch.save(agent_state, f))
        create_file(tmp / TRAINER, lambda f: torch.save(state.to_dict(), f))
        create_file(tmp / CONFIG, json.dumps(config, indent=2).encode())
        if buffer is not None:
            write_snapshot(tmp, buffer)
        create_file(tmp / META, json.dumps(meta, indent=2).encode())

    try:
        publish_dir(make_dir(root) / name, fill, replace=True)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise RunError(
            f"checkpoint {root / name} could not be written ({reason}); the earlier"
            " checkpoints are intact"
        ) from exc
    return root / name


def recover(root: Path) -> None:
    """Clean up after a process killed while writing: put back a replaced checkpoint whose
    successor never landed, and delete temporary directories."""
    if not root.is_dir():
        return
    for old in root.glob(".old-*"):
        name = old.name.removeprefix(".old-").rsplit("-", 1)[0]
        if not (root / name).exists() and is_complete(old):
            os.replace(old, root / name)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for tmp in root.glob(".tmp-*"):
        shutil.rmtree(tmp, ignore_errors=True)


@dataclass
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: its dir.
        policy: ``policy.pt``, the acting weights.
        agent_state: ``agent.pt`` (a full load only; else empty).
        config: ``config.json``, its moved ``_target_`` values renamed
            (:mod:`border_py.runs.compat`).
        meta: ``meta.json``.
    """

    path: Path
    policy: dict[str, torch.Tensor]
    agent_state: dict[str, Any]
    _state: TrainerState | None  # trainer.pt (None: loaded for its policy only)
    config: dict[str, Any]
    meta: dict[str, Any]

    @property
    def state(self) -> TrainerState:
        """``trainer.pt``, typed: the run's state at the checkpoint (a full load only).

        Raises:
            ValueError: the checkpoint was loaded for its policy only (``full=False``).
        """
        if self._state is None:
            raise ValueError(f"{self.path}: loaded for its policy only, without its trainer state")
        return self._state

    def buffer(self) -> dict[str, np.ndarray] | None:
        """The replay-buffer snapshot (memory-mapped arrays), if the checkpoint has one.

        Raises:
            ConfigError: one line: a corrupt or truncated file of the snapshot.
        """
        return read_snapshot(self.path)


def _load_json(file: Path, keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """A checkpoint's JSON file: an object holding ``keys``."""
    try:
        loaded = read_json(file)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{file}: corrupt checkpoint file ({first_line(exc)})") from None
    missing = [k for k in keys if k not in loaded] if isinstance(loaded, dict) else keys
    if not isinstance(loaded, dict) or missing:
        raise ConfigError(f"{file}: not border-py's (no {', '.join(missing) or 'object'})")
    return loaded


def saved_by_0_1(meta: dict[str, Any]) -> bool:
    """Whether border-py 0.1 wrote the checkpoint (its trainer state cannot be resumed)."""
    return str(meta.get("border_py", "0.1.0")).startswith("0.1.")


def load_checkpoint(path: str | Path, full: bool = True) -> Checkpoint:
    """Load the checkpoint :func:`find_checkpoint` picks for ``path`` (``full=False``: policy only,
    from a complete checkpoint or a shared one of :data:`POLICY_FILES`).

    The saved config is read as this version reads it: its moved ``_target_`` values renamed,
    the keys added since given their shipped values (:func:`~border_py.runs.compat.current_config`).

    Raises:
        ConfigError: a full load (to resume) of a checkpoint that border-py 0.1 wrote; a
            ``trainer.pt`` that holds no trainer state.
    """
    ckpt = find_checkpoint(path, policy_only=not full)
    meta = _load_json(ckpt / META)
    if full and saved_by_0_1(meta):
        raise ConfigError(
            f"{ckpt}: saved by border-py {meta.get('border_py', '0.1')}, whose runs later versions"
            " cannot resume (the trainer state changed in 0.2); border eval still plays its policy"
        )
    config = current_config(_load_json(ckpt / CONFIG, CONFIG_KEYS))
    return Checkpoint(
        path=ckpt,
        policy=load_pt(ckpt / POLICY),
        agent_state=load_pt(ckpt / AGENT) if full else {},
        _state=_load_state(ckpt / TRAINER) if full else None,
        config=config,
        meta=meta,
    )


def _load_state(file: Path) -> TrainerState:
    """A checkpoint's ``trainer.pt``, typed (a file without the run's state is refused).

    Raises:
        ConfigError: one line: not a trainer state.
    """
    saved = load_pt(file)
    try:
        return TrainerState.from_dict(saved)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{file}: not a trainer state ({first_line(exc)})") from None


def pick_checkpoint(path: str | Path) -> Checkpoint:
    """The checkpoint whose policy a run is used by (``border eval``, ``load_policy``, exports):
    a run dir's ``best`` checkpoint, else what :func:`load_checkpoint` finds (the newest periodic
    one, or the checkpoint dir named), loaded without the training state (``full=False``)."""
    best = Path(path).expanduser() / CHECKPOINTS / BEST
    return load_checkpoint(best if is_complete(best) else path, full=False)
