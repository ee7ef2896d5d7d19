"""Run many ``border`` command lines in one process: torch and Hydra are imported once.

``in_process.py``: the docs test's check and transcript commands, which compose and check a
config and exit. Reads a JSON list of ``{"argv": [...], "env": {...}}`` on stdin and prints a JSON
list of ``{"rc": ..., "stdout": ..., "stderr": ...}``, one per command, in order.

``in_process.py --serve LOG``: a run block's lines, one at a time (a line's words may name what
the lines before it made): a JSON request a line on stdin, its result a JSON line on stdout.
What the lines' child processes (actors, trials) write goes to the file ``LOG``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback

from hydra.core.global_hydra import GlobalHydra

from border_py.cli.main import main


def run(argv: list[str], env: dict[str, str]) -> dict:
    """``border <argv>`` with ``env`` set, its exit status and output."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    GlobalHydra.instance().clear()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc: object = main(argv)
            except SystemExit as exit_:
                rc = exit_.code
            except Exception:
                rc = "exception"
                traceback.print_exc()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


def serve(log: str) -> None:
    """Answer each request line on stdin with its result line on stdout (see the module)."""
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    with open(log, "ab") as sink:  # the child processes' output, and anything the lines leave
        os.dup2(sink.fileno(), sys.stdout.fileno())
        os.dup2(sink.fileno(), sys.stderr.fileno())
    for line in sys.stdin:
        item = json.loads(line)
        replies.write(json.dumps(run(item["argv"], item["env"])) + "\n")
        replies.flush()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        results = [run(item["argv"], item["env"]) for item in json.load(sys.stdin)]
        json.dump(results, sys.__stdout__)
