"""Files of run, sweep and study dirs: written never through a symlink, durably, with the umask's
modes; read never through a symlink, never blocking, never more than a record's size.

Every file border creates is ``0o666 & ~umask`` and every dir ``0o777 & ~umask``: the user's umask
decides (022: readable by all, 077: private). A file is published by :func:`write_file` (a temporary
file of its own, fsynced, renamed over the name, the dir fsynced): a reader sees the old file or
the new one, and a symlink at the name is replaced, never written through. A dir is published
likewise, whole (:func:`border_py.publishing.publish_dir`). Dirs border makes or moves files into are refused when they
are symlinks (:func:`make_dir`).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from border_py.errors import ConfigError

__all__ = [
    "LogFile",
    "NotRegular",
    "create_file",
    "dir_mode",
    "fsync_dir",
    "link_refusal",
    "make_dir",
    "open_regular",
    "present",
    "read_json",
    "read_record",
    "refuse_links_in",
    "write_file",
]

Writer = Callable[[BinaryIO], object]  # writes a file's bytes into an open binary handle
T = TypeVar("T")
RECORD_LIMIT = 16 * 2**20  # bytes: border's JSON and YAML records (configs, results, ids) are KBs


def link_refusal(path: Path | str) -> ConfigError:
    """The one-line refusal of a symlink where border reads or writes a run's own file or dir."""
    return ConfigError(
        f"{path}: is a symbolic link; border never follows links in a run, sweep or study dir"
        " (put the file or dir itself there, or remove the link)"
    )


def umask() -> int:
    """The process's umask (read from ``/proc``, else by setting it and back)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode of a file border creates: ``0o666 & ~umask``."""
    return 0o666 & ~umask()


def dir_mode() -> int:
    """The mode of a dir border creates: ``0o777 & ~umask``."""
    return 0o777 & ~umask()


def fsync_dir(path: Path) -> None:
    """Make a dir's entries (files created, renamed into it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fill(fd: int, data: bytes | Writer) -> None:
    """Write ``data`` (bytes, or a writer of them) to the open ``fd``, fsync and close it."""
    with os.fdopen(fd, "wb") as handle:
        if isinstance(data, bytes):
            handle.write(data)
        else:
            data(handle)
        handle.flush()
        os.fsync(handle.fileno())


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened to read, if it is a regular file: never through a symlink, never blocking
    on a FIFO or a device.

    Raises:
        OSError: missing, a link (``ELOOP``), or not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        handle.close()
        raise OSError(f"{path}: not a regular file")
    return handle


class NotRegular(ConfigError):
    """An entry border reads or writes that is a symbolic link, or not a regular file (or dir).

    Attributes:
        path: the entry.
        link: it is a symbolic link.
    """

    def __init__(self, path: Path | str, link: bool, message: str) -> None:
        super().__init__(message)
        self.path, self.link = Path(path), link


def present(path: Path, directory: bool = False) -> bool:
    """Whether ``path`` is there, looked at without following a link: False when it is absent,
    True when it is a regular file (``directory``: a dir).

    Raises:
        NotRegular: ``path`` is a symbolic link, or an entry of another kind (a FIFO, a device, a
            dir where a file is expected); one line naming it.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise NotRegular(path, True, str(link_refusal(path)))
    if not (stat.S_ISDIR(mode) if directory else stat.S_ISREG(mode)):
        raise NotRegular(
            path,
            False,
            f"{path}: not a {'dir' if directory else 'regular file'}; border reads and writes only"
            " regular files and dirs in a run, sweep or study dir",
        )
    return True


def refuse_links_in(
    root: Path, allowed: Callable[[Path], bool] | None = None, own: bool = True
) -> None:
    """Refuse a symlink, or anything but a regular file or a dir, anywhere under ``root`` (``root``
    itself is not looked at); links are never followed, nor linked dirs descended into.

    Args:
        root: the dir (absent: nothing to refuse).
        allowed: the links accepted (by path), if any; every other link is refused.
        own: look at every level below (False: ``root``'s own entries only).

    Raises:
        NotRegular: one line naming the entry (a link's target is left as it is).
    """
    for top, dirs, files in os.walk(root):  # never descends into a linked dir
        names = sorted(dirs + files)
        if not own:
            dirs[:] = []
        for name in names:
            path = Path(top, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                if allowed is None or not allowed(path):
                    raise NotRegular(path, True, str(link_refusal(path)))
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise NotRegular(
                    path,
                    False,
                    f"{path}: neither a file nor a dir (a FIFO, socket or device); border reads"
                    " only files and dirs there",
                )


def read_record(path: Path, limit: int = RECORD_LIMIT) -> bytes:
    """The bytes of a record file of a run (``result.json``, a checkpoint's ``config.json``, ...):
    a regular file (see :func:`open_regular`) of at most ``limit`` bytes.

    Raises:
        OSError: see :func:`open_regular`; or larger than ``limit``.
    """
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > limit:
            raise OSError(f"{path}: {size} bytes, more than a record's {limit}")
        return handle.read(limit)


def read_json(path: Path) -> Any:
    """A record file's JSON (see :func:`read_record`).

    Raises:
        OSError: see :func:`read_record`.
        ValueError: not JSON, or nested too deep to parse.
    """
    try:
        return json.loads(read_record(path))
    except RecursionError:
        raise ValueError(f"{path}: nested too deep") from None


def write_file(path: Path, data: bytes | Writer) -> Path:
    """Publish ``path`` atomically and durably; return it.

    The bytes go to a new temporary file in ``path``'s dir (an exclusive create, which never
    follows a link), are fsynced, get the file mode, and the file is renamed over ``path`` (which
    replaces a symlink there, never its target); then the dir is fsynced.

    Raises:
        OSError: the file could not be written; ``path`` is as it was and no temporary file is left.
    """
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        exc.filename = str(path)  # the file asked for, not a temporary name
        raise
    try:
        try:
            os.fchmod(fd, file_mode())
        except BaseException:
            os.close(fd)
            raise
        _fill(fd, data)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            exc.filename = str(path)
        raise
    fsync_dir(path.parent)
    return path


def create_file(path: Path, data: bytes | Writer) -> None:
    """Create ``path``, which must not exist (an exclusive create: never a link's target, never an
    earlier file), with ``data``, fsynced; its dir is not fsynced.

    Raises:
        FileExistsError: ``path`` exists (a symlink there included).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    _fill(os.open(path, flags, 0o666), data)  # the umask decides the mode


def make_dir(path: Path) -> Path:
    """``path`` as a dir border writes into: created (with its parents; its entry fsynced) unless
    it is a dir already; return it.

    Raises:
        ConfigError: ``path`` is a symlink (refused, never followed) or not a dir.
    """
    path = Path(path)
    try:
        os.mkdir(path, 0o777)  # the umask decides the mode
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return make_dir(path)
    except FileExistsError:
        if path.is_symlink():
            raise link_refusal(path) from None
        if not path.is_dir():
            raise ConfigError(f"{path}: not a directory") from None
        return path
    fsync_dir(path.parent)
    return path


def open_append(path: Path) -> io.TextIOWrapper:
    """``path`` opened to append text (created if needed), never through a link.

    Raises:
        ConfigError: ``path`` is a symlink.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_refusal(path) from None
        raise
    return os.fdopen(fd, "a", encoding="utf-8")


class LogFile(logging.FileHandler):
    """A log file handler that appends to its file, never through a symlink (see
    :func:`open_append`); Hydra's ``train.log`` and the Python API's use it."""

    def __init__(self, filename: str | os.PathLike[str], delay: bool = False) -> None:
        super().__init__(filename, mode="a", encoding="utf-8", delay=delay)

    def _open(self) -> io.TextIOWrapper:  # logging.FileHandler's hook: opens the stream
        return open_append(Path(self.baseFilename))
