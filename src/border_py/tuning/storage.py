"""Where a study lives: by default a journal file in the study dir (Optuna's ``JournalStorage``
over a ``JournalFileBackend``, the file storage Optuna supports for several processes at once);
the SQLite file of a study started before the journal, where one is there; or the user's own
storage (``--storage``: a database URL or a journal file path).

A study dir is the user's, but its files may have come from elsewhere: the journal and the SQLite
file there are never opened through a link (Optuna appends to the journal with a plain ``open``),
nor when they are anything but a regular file (a FIFO would block the read); see
:func:`~border_py.files.present`.

Neither storage is given heartbeats: the ``border tune`` that starts a trial's process marks the
trial FAIL when the process ends without recording an outcome (:mod:`.tuner`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from border_py.errors import ConfigError, first_line
from border_py.files import present
from border_py.secrets import redact_text

__all__ = ["JOURNAL_FILE", "SQLITE_FILE", "locate", "open_storage"]

JOURNAL_FILE = "journal.log"  # the study dir's journal (the default storage)
SQLITE_FILE = "study.db"  # where a study lived before the journal: still opened where it is
SQLITE_TIMEOUT_SECONDS = 60  # how long a process waits for another one's SQLite write lock


def is_url(location: str) -> bool:
    """Whether a storage location is a database URL (else it is a journal file path)."""
    return "://" in location


def locate(study_dir: Path, given: str | None) -> str:
    """The study's storage location.

    Args:
        study_dir: the study dir.
        given: ``--storage``: a database URL (``sqlite:///...``, ``postgresql://...``) or a
            journal file path (made absolute, so that every trial process opens the same file).

    Returns:
        ``given``; else ``sqlite:///<study dir>/study.db`` for a study dir that holds that file
        and no journal (a study started before the journal); else ``<study dir>/journal.log``.

    Raises:
        ConfigError: ``given`` is a directory; or (none given) the study dir's journal or SQLite
            file is a symbolic link or not a regular file (one line naming it; nothing is opened).
    """
    if given:
        if is_url(given):
            return given
        path = Path(given).expanduser().absolute()
        if path.is_dir():
            raise ConfigError(
                f"--storage {given}: a directory; give a journal file path or a database URL"
                " (sqlite:///study.db, postgresql://...)"
            )
        return str(path)
    journal, older = study_dir / JOURNAL_FILE, study_dir / SQLITE_FILE
    has_journal, has_older = present(journal), present(older)  # both looked at
    if has_older and not has_journal:
        return f"sqlite:///{older}"
    return str(journal)


def open_storage(location: str) -> Any:
    """Optuna's storage at ``location`` (see :func:`locate`); one :class:`ConfigError` line when
    it cannot be opened (a malformed URL, a missing database driver, a refused connection)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    try:
        if not is_url(location):
            return optuna.storages.JournalStorage(JournalFileBackend(location))
        sqlite = location.startswith("sqlite")
        connect = {"connect_args": {"timeout": SQLITE_TIMEOUT_SECONDS}} if sqlite else {}
        return optuna.storages.RDBStorage(location, engine_kwargs=connect)
    except Exception as exc:  # SQLAlchemy's, a driver's or the file system's: one line
        line = first_line(exc)
        raise ConfigError(f"--storage {redact_text(location)}: {redact_text(line)}") from None
