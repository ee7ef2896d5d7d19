"""The MLflow recorder's own store: which SQLite file a run records to when the command names none
(``recorder.mlflow.tracking_uri=null``), and whether a store found in a dir is border's own.

A store is data that chooses where things go: the artifact location of its experiment (and of a
run in it) is where MLflow sends the run's best policy, config and videos, and an ``http(s)://``
one gets the user's MLflow credentials with them. So a store found in a dir is used only when it
is border's own: everything it would send the run's artifacts to is a ``file:`` URI under the
``mlartifacts/`` dir of the run or of the store (:func:`artifact_roots`, :func:`local_under`). A
store is inspected read-only (:func:`inspect`: Python's ``sqlite3``, nothing in it written or run)
before MLflow opens it; one that is not border's own is never opened, and the run records to a
store of its own beside it (``mlflow-2.db``, ...: :func:`choose_store`), with one line saying so.
What border sends is checked again where it is sent (:func:`own_artifacts`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from border_py.errors import ConfigError, RunError, printable
from border_py.files import NotRegular, link_refusal, present, refuse_links_in
from border_py.layout import MLFLOW_ARTIFACTS, MLFLOW_STORE
from border_py.secrets import redact_text

__all__ = [
    "Found",
    "artifact_roots",
    "choose_store",
    "inspect",
    "local_under",
    "moved_from",
    "own_artifacts",
    "store_named",
    "store_uri",
]

SQLITE = "sqlite:///"
STORE_NAME = re.compile(r"mlflow(-[1-9][0-9]{0,2})?\.db")  # mlflow.db, mlflow-2.db, ...
BESIDE = 100  # how many store names border tries in one dir
LOCKED_WAIT_SECONDS = 60.0  # how long a store's reader waits out another process's write lock


def artifact_roots(run_dir: Path, store_dir: Path) -> tuple[Path, ...]:
    """Where border's own store keeps a run's artifacts: ``mlartifacts/`` beside the store (what
    border creates its experiment with), or in the run dir (a store named on the command line
    when the run started)."""
    return tuple(dict.fromkeys(d / MLFLOW_ARTIFACTS for d in (store_dir, run_dir)))


def store_uri(path: Path) -> str:
    """The tracking URI of the SQLite store file ``path``."""
    return f"{SQLITE}{path}"


def store_named(uri: str, dirs: tuple[Path, ...]) -> Path | None:
    """The store file a saved tracking URI names, when it is one of border's own store names
    (:data:`STORE_NAME`) in one of ``dirs`` (compared resolved: a path through a symlinked parent
    names the same dir); else None. The path returned is the name in that dir of ``dirs``."""
    if not uri.startswith(SQLITE):
        return None
    path = Path(uri.removeprefix(SQLITE))
    if not (STORE_NAME.fullmatch(path.name) and path.is_absolute()):
        return None
    for d in dirs:
        if d.resolve() == path.parent.resolve():
            return d / path.name
    return None


def moved_from(uri: str, dirs: tuple[Path, ...]) -> Path | None:
    """The dir a run's store was in when the saved tracking URI ``uri`` names a store of the
    same name in a dir of the same name elsewhere, and ``dirs`` hold that store (the run, or its
    sweep, was moved or copied there); else None."""
    if not uri.startswith(SQLITE):
        return None
    path = Path(uri.removeprefix(SQLITE))
    if not STORE_NAME.fullmatch(path.name):
        return None
    for d in dirs:
        if d.name == path.parent.name and os.path.lexists(d / path.name):
            return path.parent
    return None


def local_under(uri: str, roots: tuple[Path, ...]) -> bool:
    """Whether the artifact URI ``uri`` is a ``file:`` URI of a path under one of ``roots``
    (absolute, without ``..``: compared as written, never resolved)."""
    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return False
    if parts.query or parts.fragment:
        return False
    path = unquote(parts.path)
    if not path.startswith("/") or os.path.normpath(path) != path.rstrip("/"):
        return False
    return any(Path(path).is_relative_to(root) for root in roots)


@dataclass(frozen=True)
class Found:
    """What :func:`inspect` read of a store.

    Attributes:
        foreign: why the store is not border's own (None: it is, or it holds nothing yet).
        has_run: the run asked about is in the store.
    """

    foreign: str | None
    has_run: bool = False


def inspect(path: Path, experiment: str, run_id: str | None, roots: tuple[Path, ...]) -> Found:
    """Read the store file ``path`` without writing or running anything in it: is the artifact
    location of ``experiment`` (and of the run ``run_id``, if given) under ``roots``?

    A store without MLflow's tables yet (a sweep's, being created by its first job) holds
    nothing foreign; a link, or a file that is not a SQLite database, is foreign. A store another
    process holds locked (a sweep's job creating its tables) is waited for, up to
    :data:`LOCKED_WAIT_SECONDS`.

    Raises:
        RunError: the store stayed locked that long.
    """
    try:
        if not present(path):
            return Found(None)
    except NotRegular as exc:
        return Found("it is a symbolic link" if exc.link else "it is not a file")
    read_only = f"{path.absolute().as_uri()}?mode=ro"
    try:  # a sweep's job creating the store's tables holds its write lock for seconds: waited out
        with contextlib.closing(
            sqlite3.connect(read_only, uri=True, timeout=LOCKED_WAIT_SECONDS)
        ) as db:
            db.execute("PRAGMA trusted_schema = OFF")  # its views and triggers call no function
            rows = db.execute(
                "SELECT artifact_location FROM experiments WHERE name = ?", (experiment,)
            ).fetchall()
            runs = (
                db.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)).fetchall()
                if run_id is not None
                else []
            )
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return Found(None)
        if "locked" in str(exc):  # still, after the wait: neither border's own nor foreign
            raise RunError(
                f"recorder.mlflow: {path} stayed locked for {LOCKED_WAIT_SECONDS:g} s (another"
                " process writes it); try again when it is done"
            ) from None
        return Found(f"it cannot be read ({exc})")
    except sqlite3.DatabaseError as exc:
        return Found(f"it is not an MLflow store ({exc})")
    for (uri,) in [*rows, *runs]:
        if not (isinstance(uri, str) and local_under(uri, roots)):
            return Found(f"it keeps artifacts at {_shown(uri)}", bool(runs))
    return Found(None, bool(runs))


def choose_store(store_dir: Path, run_dir: Path, experiment: str) -> tuple[Path, str | None]:
    """The store a new MLflow run records to in ``store_dir``: ``mlflow.db`` if it is absent or
    border's own (:func:`inspect`), else the first of ``mlflow-2.db``, ``mlflow-3.db``, ... that
    is; with why ``mlflow.db`` was left alone (None: it was not), for the recorder's one line.

    Raises:
        ConfigError: none of :data:`BESIDE` names is free.
    """
    first = store_dir / MLFLOW_STORE
    roots = artifact_roots(run_dir, store_dir)
    reason = inspect(first, experiment, None, roots).foreign
    if reason is None:
        return first, None
    for n in range(2, BESIDE + 1):
        path = store_dir / f"mlflow-{n}.db"
        if inspect(path, experiment, None, roots).foreign is None:
            why = (
                f"{first}: not border's own MLflow store ({reason}; to record there, name it:"
                f" recorder.mlflow.tracking_uri={store_uri(first)})"
            )
            return path, why
    raise ConfigError(
        f"recorder.mlflow: {store_dir} holds no MLflow store border may use ({first} to"
        f" mlflow-{BESIDE}.db are others'); name one with recorder.mlflow.tracking_uri=..."
    )


def own_artifacts(uri: str, roots: tuple[Path, ...], what: str) -> None:
    """Refuse to log to ``what`` (an MLflow run or experiment) whose artifact URI ``uri`` is not
    under ``roots`` (see :func:`local_under`), or whose root is or holds a symlink, FIFO or device
    (MLflow's local artifact store writes through links).

    Raises:
        ConfigError: one line naming the URI, or the link.
    """
    if not local_under(uri, roots):
        raise ConfigError(
            f"recorder.mlflow: {what} keeps artifacts at {_shown(uri)}, not under"
            f" {' or '.join(map(str, roots))}; border sends a run's artifacts elsewhere only to a"
            " store the command names (recorder.mlflow.tracking_uri=...)"
        )
    for root in roots:
        if os.path.islink(root):
            raise link_refusal(root)
        refuse_links_in(root)


def _shown(value: object) -> str:
    """A value read from a store, as a log line may show it (secrets redacted, text escaped)."""
    return printable(redact_text(str(value)))
