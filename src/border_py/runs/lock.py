"""A session holds its run dir for as long as it trains (:func:`session_lock`): a resume started
while the run still trains elsewhere is refused in one line instead of moving or deleting the
live session's files."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from border_py.errors import ConfigError
from border_py.files import link_refusal
from border_py.layout import LOCK

__all__ = ["RunInUse", "refuse_if_in_use", "session_lock"]

log = logging.getLogger(__name__)

# flock errors of filesystems that do not support it (some NFS and Lustre mounts): run unguarded
NO_LOCKS = (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF, errno.EINVAL)


class RunInUse(ConfigError):
    """Another live session trains the run (see :func:`session_lock`)."""


@contextlib.contextmanager
def session_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir`` for this session (creating the dir and its :data:`LOCK` file if needed,
    never through a symlink; nothing is written into it).

    An advisory ``flock``: the kernel releases it when the process exits, however it ends
    (``kill -9`` included), so a stale lock never outlives its session.

    On a filesystem without ``flock`` the session goes on unguarded, with a warning.

    Raises:
        RunInUse: another live session holds the dir (its pid is named where Linux says it).
        ConfigError: :data:`LOCK` is a symlink.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC  # NFS locks need write access
    try:
        fd = os.open(run_dir / LOCK, flags, 0o666)  # the umask decides (a group may share runs)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise link_refusal(run_dir / LOCK) from None
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunInUse(
                f"{run_dir}: another border session ({_lock_holder(fd)}) is training this run;"
                " wait for it to end (or stop it) before resuming"
            ) from None
        except OSError as exc:
            if exc.errno not in NO_LOCKS:
                raise
            log.warning(
                "%s: its filesystem does not lock files (%s); nothing keeps a second session"
                " from resuming this run while it trains",
                run_dir,
                exc.strerror,
            )
        yield
    finally:
        os.close(fd)  # releases the lock


def refuse_if_in_use(run_dir: Path) -> None:
    """Raise :func:`session_lock`'s refusal now if a live session trains the run in ``run_dir``
    (a check before anything of the run is read or moved; the session takes the lock itself).
    A dir without the lock file has no session: it is left as it is."""
    if (run_dir / LOCK).is_file():
        with session_lock(run_dir):
            pass


def _lock_holder(fd: int) -> str:
    """``pid N`` of the process holding the flock on ``fd``'s file (from ``/proc/locks``)."""
    st = os.fstat(fd)
    file_id = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if len(fields) > 5 and fields[1] == "FLOCK" and fields[5] == file_id:
                return f"pid {fields[4]}"
    return "pid unknown"
