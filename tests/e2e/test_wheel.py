"""A non-editable wheel install, with only the packages ``pip install border-py`` installs (no
extra), finds its configs and trains when run from an unrelated directory."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..conftest import REPO


def requirements(wheel: Path) -> list[Requirement]:
    """The wheel's own ``Requires-Dist`` lines."""
    with zipfile.ZipFile(wheel) as whl:
        (name,) = (n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(whl.read(name).decode())
    return [Requirement(line) for line in meta.get_all("Requires-Dist") or []]


def light_closure(wheel: Path) -> list[metadata.Distribution]:
    """The installed distributions ``pip install <wheel>`` needs: its requirements outside every
    extra, and theirs, as this Python's markers select them."""
    found: dict[str, metadata.Distribution] = {}
    todo = requirements(wheel)
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in found or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        found[name] = metadata.distribution(name)
        todo += [Requirement(line) for line in found[name].requires or []]
    return list(found.values())


def link_files(dists: list[metadata.Distribution], into: Path) -> None:
    """Symlink each file the distributions installed into the importable tree (their RECORD) under
    ``into``: that folder holds these packages and no other."""
    for dist in dists:
        assert dist.files is not None, f"{dist.metadata['Name']} lists no files"
        for file in dist.files:
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue  # scripts outside site-packages; bytecode is rebuilt
            target = into / file
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists():
                target.symlink_to(Path(str(dist.locate_file(file))).resolve())


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
    # border-py from the wheel; its dependencies (torch, hydra, ...) from the test's environment, but
    # only those a light install (no extra) brings: no optuna, moviepy, onnx, ... is importable
    deps = tmp_path / "deps"
    link_files(light_closure(wheel), deps)
    (next((env_dir / "lib").glob("python3*/site-packages")) / "deps.pth").write_text(f"{deps}\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing from a checkout
    for extra in ("optuna", "moviepy", "onnx", "huggingface_hub", "stable_baselines3", "pytest"):
        probe = subprocess.run([py, "-c", f"import {extra}"], capture_output=True, env=env)
        assert probe.returncode != 0, f"{extra} is importable in the light install"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    border = env_dir / "bin" / "border"
    where = subprocess.run(
        [py, "-c", "import border_py.config as c; print(c.config_dir())"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
        env=env,
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
        env=env,
    )
    assert out.returncode == 0, out.stderr
    (run_dir,) = (elsewhere / "outputs").glob("*/*")
    assert (run_dir / "checkpoints" / "best" / "policy.pt").is_file()
