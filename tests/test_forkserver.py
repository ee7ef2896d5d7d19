"""A forkserver that dies: its children are told apart from children that failed.

Each check runs in a script of its own, with its own forkserver (the test runner's is shared by
every test of the session).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = """
import os, signal, sys, time
import psutil
from border_py.processes.children import forkserver_context, init_child, start_process
from border_py.processes.supervision import RestartPolicy, exit_cause

def exits_255():
    init_child("child")
    sys.exit(255)

def starts_late(flag, out):
    while not os.path.exists(flag):
        time.sleep(0.01)
    init_child("child")
    with open(out, "w") as f:
        f.write("alive")
    time.sleep(60)

def verdict(process, server):
    cause, exitcode = exit_cause(process.exitcode, server)
    failed = RestartPolicy("it", 3).verdict(cause, None, False, exitcode) is not None
    return f"{cause}, {'fails the run' if failed else 'restarted'}"

if __name__ == "__main__":
    flag, out = sys.argv[1:]
    ctx = forkserver_context()
    own = ctx.Process(target=exits_255)
    server = start_process(ctx, own)
    own.join(60)
    print("its own 255:", verdict(own, server))
    late = ctx.Process(target=starts_late, args=(flag, out))
    assert start_process(ctx, late) == server
    os.kill(server, signal.SIGKILL)  # before the child armed its parent-death signal
    late.join(60)
    print("lost with its server:", verdict(late, server))
    open(flag, "w").close()  # the orphan goes on to its init_child
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(late.pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    else:
        psutil.Process(late.pid).kill()
    print("the orphan:", "wrote" if os.path.exists(out) else "exited at its start")
    again = ctx.Process(target=exits_255)
    print("a new server:", start_process(ctx, again) != server)
    again.join(60)
"""


@pytest.mark.slow
def test_children_lost_with_their_forkserver_are_restartable_and_its_own_255_is_a_failure(
    tmp_path,
):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    out = subprocess.run(
        [sys.executable, script, str(tmp_path / "flag"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "its own 255: exit code 255, fails the run",
        "lost with its server: its fork server died, restarted",
        "the orphan: exited at its start",
        "a new server: True",
    ]
