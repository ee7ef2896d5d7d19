"""Checkpoints in ``<run dir>/checkpoints/``: written atomically, found and loaded without pickle.

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

import itertools
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from border_py.errors import ConfigError, RunError, first_line
from border_py.files import create_file, fsync_dir, make_dir, publish_dir, read_json
from border_py.layout import (
    ABANDONED,
    AGENT,
    BEST,
    CHECKPOINTS,
    CONFIG,
    META,
    POLICY,
    TRAINER,
)
from border_py.runs.compat import current_targets
from border_py.runs.links import refuse_links
from border_py.runs.pt_files import load_pt
from border_py.runs.replay_snapshot import read_snapshot, write_snapshot
from border_py.runs.state import TrainerState

REQUIRED = (POLICY, AGENT, TRAINER, CONFIG, META)
# what acting with a policy needs: a shared checkpoint (border push) holds these alone
POLICY_FILES = (POLICY, CONFIG, META)
CONFIG_KEYS = ("seed", "env", "agent")  # what every saved config holds (border eval builds them)
STEP_DIR = re.compile(r"^\d{9}$")


def step_name(opt_steps: int) -> str:
    """The directory name of a periodic checkpoint: opt steps zero-padded to 9 digits."""
    return f"{opt_steps:09d}"


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

    The dir is published whole (:func:`border_py.files.publish_dir`: written into a hidden
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


def periodic_checkpoints(root: Path) -> list[Path]:
    """Complete periodic checkpoints under ``root``, oldest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if STEP_DIR.match(p.name) and is_complete(p)]
    return sorted(found, key=lambda p: p.name)


def prune(root: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` periodic checkpoints (``best`` is never deleted)."""
    for old in periodic_checkpoints(root)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def set_aside_newer(root: Path, opt_steps: int) -> list[Path]:
    """Move checkpoints newer than ``opt_steps`` to ``root/abandoned/`` (a run resumed from an
    older checkpoint starts a new timeline): the periodic ones, which would be mistaken for its
    newest, and ``best`` when it was saved later (the new timeline would replace it at its first
    evaluation above the older best). A name already taken there (a timeline abandoned earlier)
    gets a suffix: ``<step>.2``, ``best.2``, ...

    Raises:
        ConfigError: ``root/abandoned`` is a symlink (nothing is moved).
    """
    newer = [path for path in periodic_checkpoints(root) if int(path.name) > opt_steps]
    best = root / BEST
    if best.is_dir() and _saved_after(best, opt_steps):
        newer.append(best)
    if not newer:
        return []
    abandoned = make_dir(root / ABANDONED)
    moved = []
    for path in newer:
        target = abandoned / path.name
        for k in itertools.count(2):
            if not os.path.lexists(target):
                break
            target = abandoned / f"{path.name}.{k}"
        os.replace(path, target)
        moved.append(target)
    fsync_dir(abandoned)
    fsync_dir(root)
    return moved


def _saved_after(checkpoint: Path, opt_steps: int) -> bool:
    """Whether ``checkpoint``'s ``meta.json`` says it was saved after ``opt_steps`` (one that
    does not say counts as later: set aside rather than replaced)."""
    try:
        saved = json.loads((checkpoint / META).read_text()).get("opt_steps")
    except (OSError, ValueError, AttributeError):
        return True
    return not isinstance(saved, int) or saved > opt_steps


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


def is_complete(path: Path) -> bool:
    """Whether ``path`` holds every file of a checkpoint."""
    return all((path / f).is_file() for f in REQUIRED)


def holds_policy(path: Path) -> bool:
    """Whether ``path`` holds what acting needs (:data:`POLICY_FILES`): a complete checkpoint, or
    a shared one without the training state (``border push``'s)."""
    return all((path / f).is_file() for f in POLICY_FILES)


def find_checkpoint(path: str | Path, policy_only: bool = False) -> Path:
    """The checkpoint a user points at: a checkpoint dir itself, or a run dir's newest complete one.

    With ``policy_only`` a checkpoint dir that holds only :data:`POLICY_FILES` is taken too (to
    act, never to resume).

    The run it belongs to (or, for a checkpoint dir outside a run, the checkpoint) must hold no
    symlink (see :func:`~border_py.runs.links.refuse_links`): checked as the user named it and
    once links in the user's own path are resolved.

    Raises:
        ConfigError: missing path, not a border-py run, no complete checkpoint, or a symlink in
            the run.
    """
    given = Path(os.path.abspath(Path(path).expanduser()))
    path = given.resolve()
    if not path.exists():
        raise ConfigError(f"{path}: no such file or directory")
    if is_complete(path) or (policy_only and holds_policy(path)):
        _refuse_links(given, path)
        return path
    if (path / CHECKPOINTS).is_dir():
        _refuse_links(given, path)
        newest = periodic_checkpoints(path / CHECKPOINTS)
        if newest:
            return newest[-1]
        raise ConfigError(f"{path}: the run has no complete checkpoint to start from")
    if path.parent.name == CHECKPOINTS:
        missing = [f for f in REQUIRED if not (path / f).is_file()]
        raise ConfigError(f"{path}: incomplete checkpoint (missing {', '.join(missing)})")
    raise ConfigError(
        f"{path}: not a border-py run or checkpoint directory (no checkpoints/ inside)"
    )


def _refuse_links(given: Path, found: Path) -> None:
    """:func:`~border_py.runs.links.refuse_links` for the run of ``given`` (a run or checkpoint
    dir as the user named it) and of ``found`` (the same, the user's own links resolved)."""
    for run in dict.fromkeys(_run_of(p) or p for p in (given, found)):
        refuse_links(run)


def _run_of(path: Path) -> Path | None:
    """The run a checkpoint dir belongs to: ``<run>/checkpoints/<name>`` or an abandoned one,
    ``<run>/checkpoints/abandoned/<name>`` (None: neither)."""
    if path.parent.name == CHECKPOINTS:
        return path.parent.parent
    if path.parent.name == ABANDONED and path.parent.parent.name == CHECKPOINTS:
        return path.parents[2]
    return None


def run_dir_of_checkpoint(checkpoint: Path) -> Path:
    """The run directory a checkpoint belongs to, to continue it in.

    Raises:
        ConfigError: the checkpoint is not one of a run's ``checkpoints/`` (an abandoned
            timeline's is refused: its run has gone on without it).
    """
    if checkpoint.parent.name != CHECKPOINTS:
        raise ConfigError(
            f"{checkpoint}: not in a run's checkpoints/ dir, so there is no run to continue"
            " (an abandoned one: move it back into checkpoints/ to resume from it)"
        )
    return checkpoint.parent.parent


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

    The saved config's moved ``_target_`` values are renamed
    (:func:`~border_py.runs.compat.current_targets`).

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
    config = current_targets(_load_json(ckpt / CONFIG, CONFIG_KEYS))
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
