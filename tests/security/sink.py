"""An HTTP sink on 127.0.0.1 that must receive nothing, and a planted MLflow store that sends there:
shared by the recorder-store tests."""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

Requests = list[tuple[str, str, dict[str, str], bytes]]  # method, path, headers, body

TOKEN = "victims-real-mlflow-token"
CREDENTIALS = {
    "MLFLOW_TRACKING_TOKEN": TOKEN,
    "MLFLOW_TRACKING_USERNAME": "alice",
    "MLFLOW_TRACKING_PASSWORD": "alices-password",
}


@contextlib.contextmanager
def serving() -> Iterator[tuple[str, Requests]]:
    """(its URL, the requests it got): an HTTP server on 127.0.0.1 that answers 200 to anything
    and records each request's method, path, headers and body."""
    got: Requests = []

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            got.append((self.command, self.path, dict(self.headers), self.rfile.read(length)))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = _any

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/exfil", got
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def plant_store(where: Path, url: str, name: str = "mlflow.db") -> str:
    """A store at ``where/name`` whose experiment ``border-py`` keeps its artifacts at ``url``;
    return the id of a run planted in it (its artifacts at ``url`` too). The store is MLflow's own,
    made once per session (:func:`_made_by_mlflow`), given its own run id and ``url``."""
    data, made = _made_by_mlflow()
    run_id = uuid.uuid4().hex  # as MLflow makes them
    store = where / name
    store.write_bytes(data)
    with contextlib.closing(sqlite3.connect(store)) as db, db:
        db.execute("UPDATE experiments SET artifact_location = ? WHERE name = 'border-py'", (url,))
        db.execute(
            "UPDATE runs SET run_uuid = ?, artifact_uri = ? WHERE run_uuid = ?",
            (run_id, f"{url}/{run_id}/artifacts", made),
        )
        db.execute("UPDATE tags SET run_uuid = ? WHERE run_uuid = ?", (run_id, made))
    return run_id


@functools.cache
def _made_by_mlflow() -> tuple[bytes, str]:
    """The bytes of a store MLflow made (its tables take seconds to create) with an experiment
    ``border-py`` and a run in it, both keeping their artifacts at a placeholder URL; the run's id."""
    from mlflow.tracking import MlflowClient

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "mlflow.db"
        client = MlflowClient(tracking_uri=f"sqlite:///{store}")
        experiment = client.create_experiment("border-py", artifact_location="http://planted")
        run_id = client.create_run(experiment).info.run_id
        return store.read_bytes(), run_id
