"""A dir published whole: written into a hidden dir beside its name, fsynced, renamed into place.

A reader, or a process after a crash, sees no dir, the earlier one or the new one whole; never a
half-written one. Checkpoints, exports and pulled Hub folders are published this way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from border_py.files import dir_mode, fsync_dir

__all__ = ["publish_dir"]

T = TypeVar("T")


def publish_dir(dest: Path, fill: Callable[[Path], T], replace: bool = False) -> T:
    """Publish the dir ``dest`` atomically and durably; return what ``fill`` returns.

    ``fill(tmp)`` writes the dir's content into ``tmp``, a new hidden dir beside ``dest``
    (``.tmp-<name>-*``) that already has the dir mode (mkdtemp's 0700 would stay with it). Every
    file and dir in it is then fsynced, it is renamed to ``dest``, and ``dest``'s parent is
    fsynced: a reader, or a process after a crash, sees no dir, the earlier one or the new one
    whole. Whatever fails (``fill`` included), ``tmp`` is deleted and ``dest`` is as it was.

    Args:
        dest: the dir to publish; its parent must exist.
        fill: writes the content into the dir it is given.
        replace: replace whatever is at ``dest`` (a dir, a file, or a symlink itself, never its
            target): it is moved aside (``.old-<name>-<pid>``) until the new dir is in place,
            put back if the rename fails, and deleted after. Without it ``dest`` must be absent
            or an empty dir (which the rename replaces); a symlink there is refused, never
            followed. A crash between the two renames leaves the earlier dir aside:
            :func:`border_py.runs.checkpoint.recover` puts a checkpoint back.

    Raises:
        FileExistsError: without ``replace``, ``dest`` is neither absent nor an empty dir (before
            ``fill`` runs, or at the rename); ``filename`` is ``dest``.
        OSError: the hidden dir could not be made (``filename`` is ``dest``), a file could not be
            fsynced, or the rename failed.
    """
    dest = Path(dest)
    if not replace:
        _check_free(dest)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=dest.parent))
    except OSError as exc:
        exc.filename = str(dest)  # the dir asked for, not a temporary name
        raise
    try:
        os.chmod(tmp, dir_mode())
        value = fill(tmp)
        _fsync_tree(tmp)
        if replace:
            _swap(tmp, dest)
        else:
            try:
                os.rename(tmp, dest)  # an empty dir there is replaced, anything else refused
            except OSError:
                _check_free(dest)
                raise
            fsync_dir(dest.parent)
        return value
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone after the rename


def _check_free(dest: Path) -> None:
    """Raise :class:`FileExistsError` unless ``dest`` is absent or an empty dir (not a link)."""
    try:
        mode = os.lstat(dest).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode) or any(os.scandir(dest)):
        raise FileExistsError(errno.EEXIST, "exists and is not an empty dir", str(dest))


def _swap(tmp: Path, dest: Path) -> None:
    """Rename ``tmp`` to ``dest``, whatever is there moved aside until then and deleted after."""
    old = dest.parent / f".old-{dest.name}-{os.getpid()}"
    earlier = os.path.lexists(dest)
    if earlier:
        os.replace(dest, old)  # a link is moved, never followed
    try:
        os.replace(tmp, dest)
    except BaseException:
        if earlier:
            os.replace(old, dest)  # the earlier one rather than none
        raise
    fsync_dir(dest.parent)
    if earlier:
        with contextlib.suppress(OSError):  # a dir left aside is recovered or deleted later
            if stat.S_ISDIR(os.lstat(old).st_mode):
                shutil.rmtree(old)
            else:
                os.unlink(old)


def _fsync_tree(root: Path) -> None:
    """fsync every file and dir under ``root`` (links are not followed), deepest first: their
    content and entries durable before the rename that publishes ``root``."""
    for top, _, files in sorted(os.walk(root), key=lambda entry: -len(entry[0])):
        for name in files:
            path = Path(top, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        fsync_dir(Path(top))
