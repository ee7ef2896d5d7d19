"""A process of border-py ends without the interpreter collecting every object it loaded.

An interpreter's exit runs full garbage collections over every object left: with torch loaded,
about 0.4 s on a 2-core machine, both in the ``border`` process and in the forkserver (which holds
the run's stdout and stderr until it is gone). Both freeze their heap first (``gc.freeze``); these
tests observe the frozen heap where the collections would run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = """
import gc, sys
from border_py.processes.children import forkserver_context

def report(conn):
    conn.send(gc.get_freeze_count())

if __name__ == "__main__":
    ctx = forkserver_context()
    parent, child = ctx.Pipe()
    process = ctx.Process(target=report, args=(child,))
    process.start()
    assert parent.poll(60), "the forkserver child never reported"
    print(parent.recv())
    process.join(10)
"""

AT_EXIT = """
import atexit, gc, sys
atexit.register(lambda: print(gc.get_freeze_count()))  # runs after the handlers registered later
import torch
from border_py.cli.main import main
sys.argv = ["border", "--help"]
main()  # as the console script calls it
"""

IN_PROCESS = """
import atexit, gc
atexit.register(lambda: print(gc.get_freeze_count()))
import torch
from border_py.cli.main import main
main(["--help"])  # a caller's process: its heap is left alone
"""


def run(code: str, tmp_path: Path) -> int:
    """The last line that the script ``code`` prints, as an int (a file: the forkserver's children
    import its functions from it)."""
    script = tmp_path / "script.py"
    script.write_text(code)
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip().splitlines()[-1])


def test_the_forkserver_freezes_what_it_preloaded_and_its_children_inherit_it(tmp_path):
    assert run(CHILD, tmp_path) > 10_000  # torch's objects among them


def test_the_border_command_freezes_its_heap_before_the_interpreter_exits(tmp_path):
    assert run(AT_EXIT, tmp_path) > 10_000


def test_a_caller_of_main_keeps_its_heap_unfrozen(tmp_path):
    assert run(IN_PROCESS, tmp_path) == 0
