"""A local Ray that fails to start leaves no private dir behind (its session files would stay)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from border_py.actors.ray import session

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed")


def test_the_private_dir_goes_when_ray_init_fails(monkeypatch):
    root = Path(tempfile.mkdtemp(prefix="brs", dir="/tmp"))  # short: Ray's socket paths fit
    monkeypatch.setenv("RAY_TMPDIR", str(root))

    def fails(**kwargs: object) -> None:
        (Path(str(kwargs["_temp_dir"])) / "session_x").mkdir(parents=True)  # what Ray made
        raise RuntimeError("the raylet did not start")

    monkeypatch.setattr(ray, "init", fails)
    try:
        with pytest.raises(RuntimeError, match="the raylet did not start"):
            session.start_local_ray(1)
        assert list(root.iterdir()) == []
        assert session._temp_dirs == []
    finally:
        shutil.rmtree(root, ignore_errors=True)
