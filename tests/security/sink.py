"""An HTTP sink on 127.0.0.1 that must receive nothing, and a planted MLflow store that sends there:
shared by the recorder-store tests."""

from __future__ import annotations

import contextlib
import threading
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
    return the id of a run planted in it (its artifacts at ``url`` too)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{where / name}")
    experiment = client.create_experiment("border-py", artifact_location=url)
    return client.create_run(experiment).info.run_id
