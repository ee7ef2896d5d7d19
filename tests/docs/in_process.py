"""Run many quick ``border`` command lines in one process (the docs test's check and transcript
commands, which compose and check a config and exit): torch and Hydra are imported once.

Reads a JSON list of ``{"argv": [...], "env": {...}}`` on stdin and prints a JSON list of
``{"rc": ..., "stdout": ..., "stderr": ...}``, one per command, in order.
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


if __name__ == "__main__":
    results = [run(item["argv"], item["env"]) for item in json.load(sys.stdin)]
    json.dump(results, sys.__stdout__)
