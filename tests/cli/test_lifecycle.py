"""The ``border`` process's own lifecycle: signals, pipes, and scripts that call ``train``."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from border_py.processes.signals import SIGNAL_DEBOUNCE

from ..conftest import BORDER, REPO


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_in_one_line(tmp_path):
    """One actor's env hangs (the heartbeat would notice only after 60 s), so the graceful stop
    waits for that actor's goodbye: the second Ctrl-C (past the debounce of signals that arrive
    together) always comes while the first is stopping."""
    run, hung = tmp_path / "run", tmp_path / "hung"
    proc = subprocess.Popen(
        [
            *BORDER,
            "train",
            "env=gym",
            "env.id=tests.hang_env:HangOnce-v0",
            "+env.kwargs.hang_after=150",
            f"+env.kwargs.flag={hung}",
            "trainer.max_opts=1000000",
            "trainer.eval_interval=100",
            "agent.hidden_sizes=[16]",
            "progress=false",
            f"run_dir={run}",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        },
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            log = run / "train.log"
            if hung.exists() and log.is_file() and "opt 100 |" in log.read_text():
                break
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        started = time.monotonic()
        while "stopping at opt" not in log.read_text() and time.monotonic() - started < 10:
            time.sleep(0.05)
        time.sleep(max(0.0, started + SIGNAL_DEBOUNCE + 0.1 - time.monotonic()))  # a second Ctrl-C
        os.killpg(proc.pid, signal.SIGINT)
        for _ in range(2):  # more, while the hung actor is being reaped: logged, cut nothing
            time.sleep(0.4)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output
    assert output.strip().splitlines()[-1] == "border: error: interrupted"
    assert time.monotonic() - started < 6, output  # not the 10 s the drain would have waited
    assert "SIGINT: already stopping" in output
    assert json.loads((run / "result.json").read_text())["status"] == "interrupted"
    deadline = time.monotonic() + 10  # the forkserver and the actors exit just after border
    while (left := [p for p in psutil.process_iter() if _group_of(p) == proc.pid]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert not left, left


def _group_of(process: psutil.Process) -> int | None:
    with contextlib.suppress(psutil.Error, ProcessLookupError):
        return os.getpgid(process.pid)
    return None


@pytest.mark.slow
def test_help_into_a_closed_pipe_ends_quietly():
    for args in (["--help"], ["train", "--help"]):
        shell = f"{' '.join(BORDER)} {' '.join(args)} | head -n 1"
        out = subprocess.run(shell, shell=True, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip(), args
        assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr, out.stderr


@pytest.mark.slow
def test_a_script_without_a_main_guard_gets_one_line_not_a_traceback_wall(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from border_py import train

            train({{
                "_comment": "a plain-data config, as from OmegaConf.to_container",
                **__import__("json").loads(open({str(tmp_path / "cfg.json")!r}).read()),
            }})
            """
        )
    )
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from border_py.config import config_dir

    with initialize_config_dir(version_base="1.3", config_dir=str(config_dir())):
        cfg = compose(
            "train",
            overrides=[f"run_dir={tmp_path / 'run'}", "agent.hidden_sizes=[16]", "progress=false"],
        )
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("_comment", None)
    (tmp_path / "cfg.json").write_text(json.dumps(plain))
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    guard = [line for line in lines if "if __name__ == " in line]
    assert guard and guard[0].startswith("border-py: train() was called while a child process")
    assert re.match(
        r"border_py\.\S+\.(RunError|ActorFailure): (actor \d|the evaluator) failed \(exit code 1\)"
        r" before delivering anything",
        lines[-1],
    ), lines[-1]
    # the script's own traceback of that one error, not one per child process (hundreds)
    assert out.stderr.count("Traceback") == 1 and len(lines) < 40, out.stderr
