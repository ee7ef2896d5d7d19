"""A non-editable wheel install finds its configs when run from an unrelated directory."""

from __future__ import annotations

import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from ..conftest import REPO


@pytest.mark.slow
def test_installed_wheel_runs_from_anywhere(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(REPO),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = dist.glob("border_py-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir)  # no pip of its own (ensurepip takes seconds): this one installs into it
    py = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", str(wheel)],
        check=True,
        timeout=300,
    )
    # the dependencies (torch, hydra, ...) come from the test's environment, border-py from the wheel
    purelib = next(Path(p) for p in site.getsitepackages() if Path(p).name == "site-packages")
    (next((env_dir / "lib").glob("python3*/site-packages")) / "deps.pth").write_text(f"{purelib}\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    border = env_dir / "bin" / "border"
    where = subprocess.run(
        [py, "-c", "import border_py.config as c; print(c.config_dir())"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    )
    assert (
        str(env_dir) in where.stdout
    )  # configs inside the installed package, not the repo's conf/
    out = subprocess.run(
        [
            border,
            "train",
            "trainer.max_opts=50",
            "trainer.warmup_period=50",
            "trainer.eval_interval=50",
            "trainer.eval_episodes=1",
            "agent.hidden_sizes=[16]",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (run_dir,) = (elsewhere / "outputs").glob("*/*")
    assert (run_dir / "checkpoints" / "best" / "policy.pt").is_file()
