"""A run dir holds its own files and dirs: a symlink in it is refused, never followed.

A link planted in a run (``train.log`` to a file elsewhere, ``checkpoints/best`` to another run's
checkpoint, ``attempts/`` to a dir outside) would have border write, move or read files that are
not the run's. :func:`refuse_links` is called wherever a run dir is opened: a fresh run's claim,
``resume=`` and ``resume=auto`` (before Hydra opens the run's log), ``border eval``.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from border_py.files import link_refusal

CHECKPOINTS = "checkpoints"
# levels below checkpoints/ that are checked: <checkpoint>/<file>, abandoned/<checkpoint>/<file>
CHECKPOINT_DEPTH = 3


def refuse_links(run_dir: Path) -> None:
    """Refuse a symlink among ``run_dir``'s entries, under its ``checkpoints/`` (each checkpoint's
    files, ``abandoned/`` included), or, for a checkpoint dir, among its files.

    Links inside dirs that other tools fill (W&B's ``wandb/`` has its own) are theirs.

    Raises:
        ConfigError: one line naming the link (its target is left as it is).
    """
    _refuse_links_in(Path(run_dir), 1)
    _refuse_links_in(Path(run_dir) / CHECKPOINTS, CHECKPOINT_DEPTH)


def _refuse_links_in(path: Path, depth: int) -> None:
    """Refuse a symlink among ``path``'s entries, and ``depth - 1`` levels of real dirs below."""
    entries: list[os.DirEntry[str]] = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(path) as found:
        entries = sorted(found, key=lambda e: e.name)
    for entry in entries:
        if entry.is_symlink():
            raise link_refusal(entry.path)
        if depth > 1 and entry.is_dir(follow_symlinks=False):
            _refuse_links_in(Path(entry.path), depth - 1)
