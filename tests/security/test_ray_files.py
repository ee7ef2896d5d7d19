"""A local Ray's session files are the user's alone: no dir another user can write in, and no
file another user can read that holds a ``runtime_env`` ``env_vars`` value; all gone after."""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from border_py.actors.ray.session import private_temp_dir

from ..conftest import BORDER, REPO

pytest.importorskip("ray", reason="the [ray] extra is not installed")

LOCAL = [
    "actor_manager=ray",
    "actor_manager.object_store_memory=100000000",  # a local Ray of 100 MB
    "agent.hidden_sizes=[16]",
    "trainer.warmup_period=200",
    "trainer.eval_episodes=2",
    "progress=false",
]


def _reachable(path: Path, top: Path) -> bool:
    """Whether another user can reach ``path`` (``top`` and every dir between are o+x)."""
    dirs = [top / parent for parent in path.relative_to(top).parents]
    return all(os.stat(d).st_mode & stat.S_IXOTH for d in dirs)


def _exposed(top: Path, secret: bytes) -> tuple[list[str], bool]:
    """(what another user could write in, and files readable by others that hold the secret,
    whether the secret was seen) of the tree under ``top``."""
    exposed, seen = [], False
    for where, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(where, name)
            try:
                mode = os.lstat(path).st_mode
                holds = stat.S_ISREG(mode) and secret in path.read_bytes()
            except OSError:  # gone meanwhile
                continue
            seen |= holds
            if holds and mode & stat.S_IROTH:  # even where no other user can reach it
                exposed.append(f"{path} holds the secret (mode {stat.S_IMODE(mode):04o})")
            if stat.S_ISDIR(mode) and mode & stat.S_IWOTH and _reachable(path, top):
                exposed.append(f"{path} (mode {stat.S_IMODE(mode):04o})")
    return exposed, seen


def test_the_private_dir_is_where_rays_own_would_be_unless_its_sockets_would_not_fit(monkeypatch):
    short = Path(tempfile.mkdtemp(prefix="brs", dir="/tmp"))
    deep = short / ("d" * 60)  # Ray's socket paths under it would pass Linux's 107 bytes
    deep.mkdir()
    try:
        monkeypatch.setenv("RAY_TMPDIR", str(short))
        made = private_temp_dir()
        assert made.parent == short and stat.S_IMODE(made.stat().st_mode) == 0o700
        monkeypatch.setenv("RAY_TMPDIR", str(deep))
        fallback = private_temp_dir()
        assert fallback.parent == Path("/tmp") and fallback.name.startswith("border-ray-")
        fallback.rmdir()
    finally:
        shutil.rmtree(short, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_local_rays_files_are_the_users_alone_and_removed_after(tmp_path):
    ray_tmp = Path(tempfile.mkdtemp(prefix="brs", dir="/tmp"))  # short: Ray's socket paths
    ray_tmp.chmod(0o1777)  # as /tmp itself
    secret = f"probe-{uuid.uuid4().hex}"
    marker = uuid.uuid4().hex
    run = tmp_path / "run"
    args = [
        "train",
        *LOCAL,
        "trainer.max_opts=1000000",
        f"run_dir={run}",
        f"actor_manager.runtime_env={{env_vars:{{BORDER_PROBE_VALUE:{secret}}}}}",
    ]
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "RAY_TMPDIR": str(ray_tmp)}
    proc = subprocess.Popen(
        [*BORDER, *args],
        cwd=tmp_path,
        env=env | {"BORDER_TEST_MARKER": marker, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    exposed, seen = [], False
    try:
        deadline = time.monotonic() + 150
        while not seen and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
            exposed, seen = _exposed(ray_tmp, secret.encode())
        os.killpg(proc.pid, signal.SIGINT)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for process in psutil.process_iter():  # the run's, should a failed test leave any
            try:
                files = [f.path for f in process.open_files()]
                if process.environ().get("BORDER_TEST_MARKER") == marker or any(
                    f.startswith(str(ray_tmp)) for f in files
                ):
                    process.kill()
            except psutil.Error:
                continue
        left = sorted(str(p.relative_to(ray_tmp)) for p in ray_tmp.iterdir())
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert seen, output  # the runtime env's value was in a session file while it ran
    assert exposed == [], "\n".join(exposed)
    assert proc.returncode == 130, output
    assert left == []  # the local Ray's private dir is removed when it stops
