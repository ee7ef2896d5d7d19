"""Run dirs for the security tests: a tiny real run to copy, and a byte-exact view of a tree."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from border_py import train

from .. import conftest
from ..conftest import make_config

# serial, seconds on CPU: checkpoints at opt steps 100, 200 and 300, evaluations at 150 and 300
# (so the checkpoint at 100 has no best return yet, and best is from 150 or 300)
TINY = ["trainer=serial", *conftest.TINY, "trainer.save_interval=100", "progress=false"]


def tiny_run(where: Path) -> Path:
    """Train the tiny run into ``where/run``; return its dir."""
    train(make_config(where, *TINY))
    return where / "run"


def copy_run(run: Path, to: Path) -> Path:
    """A copy of ``run`` at ``to`` (links copied as links)."""
    shutil.copytree(run, to, symlinks=True)
    return to


def tree(path: Path) -> dict[str, bytes | str]:
    """Every entry under ``path``: a file's bytes, ``-> target`` for a link, ``dir`` for a dir,
    ``special`` for a FIFO (links never followed, FIFOs never read)."""
    found: dict[str, bytes | str] = {}
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            entry = Path(top) / name
            key = str(entry.relative_to(path))
            if entry.is_symlink():
                found[key] = f"-> {os.readlink(entry)}"
            elif entry.is_dir():
                found[key] = "dir"
            elif entry.is_file():
                found[key] = entry.read_bytes()
            else:  # a FIFO (reading it would block)
                found[key] = "special"
    return found
