"""Recording videos (``border eval eval.video=true``, ``border push``'s replay) draws offscreen:
SDL gets no display or sound device to look for, so no stray ``error: XDG_RUNTIME_DIR is
invalid`` reaches stderr; a user's own SDL settings are kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from border_py import train
from border_py.evaluation.video import OFFSCREEN, render_offscreen

from ..conftest import TINY, make_config, run_border

STRAY = "XDG_RUNTIME_DIR"


def _bare_env() -> dict[str, str]:
    """This environment without SDL's settings or a desktop session's runtime dir (a server's)."""
    drop = (*OFFSCREEN, STRAY, "DISPLAY", "WAYLAND_DISPLAY")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    paths = env.get("PYTHONPATH", "").split(os.pathsep)  # absolute: the child runs elsewhere
    return env | {"PYTHONPATH": os.pathsep.join(str(Path(p).resolve()) for p in paths if p)}


def test_the_settings_are_set_unless_the_user_set_them(monkeypatch):
    monkeypatch.delenv("SDL_AUDIODRIVER", raising=False)
    monkeypatch.setenv("SDL_VIDEODRIVER", "x11")  # the user's
    render_offscreen()
    assert os.environ["SDL_VIDEODRIVER"] == "x11" and os.environ["SDL_AUDIODRIVER"] == "dummy"


def test_checking_that_an_env_renders_prints_nothing_on_stderr(tmp_path):
    script = (
        "from border_py.envs.factory import GymEnvFactory\n"
        "from border_py.evaluation.video import check_video\n"
        "check_video(GymEnvFactory('CartPole-v1'), 'eval.video=true')\n"
        "print('checked')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=_bare_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and out.stdout.strip() == "checked", out.stderr
    assert STRAY not in out.stderr and "error" not in out.stderr.lower(), out.stderr


@pytest.mark.slow
def test_border_eval_video_and_border_push_print_no_stray_error(tmp_path):
    train(make_config(tmp_path, *TINY, "trainer=serial", "trainer.final_eval_episodes=1"))
    run_dir = tmp_path / "run"
    videos = tmp_path / "videos"
    commands = [
        ["eval", str(run_dir), "eval.video=true", "eval.n_episodes=1", f"eval.out={videos}"],
        ["push", str(run_dir), "--repo", "me/cartpole", "--dry-run", str(tmp_path / "card")],
    ]
    for args in commands:
        out = run_border(args, tmp_path, env=_bare_env())
        assert out.returncode == 0, out.stderr
        assert STRAY not in out.stderr, out.stderr
    assert list(videos.glob("videos_*/*.mp4")) and (tmp_path / "card" / "replay.mp4").is_file()
