"""Symlinks in run and sweep dirs: refused in one line or replaced, never followed; the link's
target byte-identical. ``border report`` skips symlinked dirs and escapes what it reads."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import pytest
import torch

from border_py import train
from border_py.errors import ConfigError
from border_py.reports.collect import find_runs
from border_py.runs.checkpoint import load_checkpoint, save_checkpoint
from border_py.runs.lock import session_lock
from border_py.runs.results import write_result
from border_py.runs.run_dir import claim, set_aside_attempt
from border_py.runs.state import TrainerState
from border_py.runs.timeline import set_aside_newer
from border_py.trainers.train import run_log

from ..conftest import make_config, run_border, run_borders
from .crafted import copy_run, tree

REFUSED = "is a symbolic link; border never follows links"


def _victim(tmp_path: Path, name: str = "victim.txt") -> Path:
    victim = tmp_path / name
    victim.write_bytes(b"precious data\n")
    return victim


def _refused(out, link: Path) -> None:
    """One line on stderr naming ``link``, exit status 2."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert f"{link}: {REFUSED}" in lines[0], lines[0]


def test_report_replaces_a_planted_png_link_and_leaves_its_target(run, tmp_path):
    sweep = tmp_path / "sweep"
    copy_run(run, sweep / "0")
    victim = _victim(tmp_path)
    (sweep / "report.png").symlink_to(victim)
    out = run_border(["report", str(sweep), "--x", "opt_steps"], tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert victim.read_bytes() == b"precious data\n"
    png = sweep / "report.png"
    assert not png.is_symlink() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "report.png"]  # no temporary file


def test_result_json_replaces_a_planted_link_and_uses_no_fixed_temporary_name(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    victim, victim2 = _victim(tmp_path), _victim(tmp_path, "victim2.txt")
    (run_dir / "result.json").symlink_to(victim)
    (run_dir / "result.json.tmp").symlink_to(victim2)  # the temporary name border used to write
    write_result(run_dir, "completed", {"best_return": 1.0})
    assert victim.read_bytes() == victim2.read_bytes() == b"precious data\n"
    result = run_dir / "result.json"
    assert not result.is_symlink() and json.loads(result.read_text())["status"] == "completed"
    assert os.readlink(run_dir / "result.json.tmp") == str(victim2)
    assert sorted(p.name for p in run_dir.iterdir()) == ["result.json", "result.json.tmp"]


def _failed_attempt(run_dir: Path) -> None:
    """What an attempt killed before its first checkpoint leaves: claim, log, result."""
    claim(run_dir, ["seed=1"])
    (run_dir / "train.log").write_text("an attempt's log\n")
    write_result(run_dir, "failed", error=RuntimeError("killed"))


def test_a_symlinked_attempts_dir_is_refused_and_nothing_moves(tmp_path):
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    _failed_attempt(run_dir)
    outside.mkdir()
    (outside / "keep").write_text("mine\n")
    (run_dir / "attempts").symlink_to(outside)
    before = tree(tmp_path)
    with pytest.raises(ConfigError, match=f"^{run_dir / 'attempts'}: {REFUSED}"):
        set_aside_attempt(run_dir)
    out = run_border(["train", "resume=auto", f"run_dir={run_dir}"], tmp_path, timeout=120)
    _refused(out, run_dir / "attempts")
    assert tree(tmp_path) == before


def test_a_symlinked_abandoned_dir_is_refused_and_nothing_moves(run, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (run / "checkpoints" / "abandoned").symlink_to(outside)
    before = tree(tmp_path)
    with pytest.raises(ConfigError, match=f"{REFUSED}"):
        set_aside_newer(run / "checkpoints", 100)
    resume = f"resume={run / 'checkpoints' / '000000100'}"
    out = run_border(["train", resume, "trainer.max_opts=200"], tmp_path, timeout=120)
    _refused(out, run / "checkpoints" / "abandoned")
    assert tree(tmp_path) == before


@pytest.mark.slow  # two border commands (at once): 11-12 s one after the other, under load
@pytest.mark.parametrize(
    "entry", ["checkpoints/best", "checkpoints/000000200", "checkpoints/000000300/policy.pt"]
)
def test_a_symlinked_checkpoint_is_refused_by_eval_and_resume(run, tmp_path, entry):
    linked = run / entry
    target = tmp_path / "elsewhere"
    os.replace(linked, target)  # the real one now lives outside the run; a link points at it
    linked.symlink_to(target)
    before = tree(tmp_path)
    calls = [
        ["eval", str(run), "eval.n_episodes=1"],
        ["train", f"resume={run}", "trainer.max_opts=400"],
    ]
    for out in run_borders(calls, tmp_path, timeout=120):  # at once: a refusal writes nothing
        _refused(out, linked)
    assert tree(tmp_path) == before  # the link's target, and the run, byte-identical


@pytest.mark.slow  # two border commands and two in-process refusals: 14 s under load
def test_a_symlinked_log_is_refused_by_resume_auto_and_a_fresh_run(run, tmp_path):
    victim = _victim(tmp_path)
    (run / "train.log").unlink()
    (run / "train.log").symlink_to(victim)  # Hydra would append to it
    (run / "result.json").unlink()  # killed: resume=auto continues it
    fresh = tmp_path / "fresh"  # holds no run: a fresh run may claim it
    fresh.mkdir()
    (fresh / "train.log").symlink_to(victim)
    before = tree(tmp_path)
    args = ["train", "resume=auto", f"run_dir={run}", "trainer.max_opts=400"]
    _refused(run_border(args, tmp_path, timeout=120), run / "train.log")
    with pytest.raises(ConfigError, match=REFUSED):  # from Python
        train(make_config(tmp_path, f"run_dir={run}", "resume=auto", "trainer.max_opts=400"))
    args = ["train", "trainer=serial", "trainer.max_opts=10", f"run_dir={fresh}"]
    _refused(run_border(args, tmp_path, timeout=120), fresh / "train.log")
    with pytest.raises(ConfigError, match=REFUSED):
        train(make_config(tmp_path, "trainer=serial", f"run_dir={fresh}"))
    assert tree(tmp_path) == before


def test_the_lock_and_the_python_api_log_never_follow_a_link(tmp_path):
    victim = _victim(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".border_lock").symlink_to(victim)
    with pytest.raises(ConfigError, match=REFUSED), session_lock(run_dir):
        pass
    (run_dir / "train.log").symlink_to(victim)
    with pytest.raises(ConfigError, match=REFUSED), run_log(run_dir):
        pass
    assert victim.read_bytes() == b"precious data\n"


def test_report_does_not_follow_a_link_loop(run, tmp_path):
    sweep = tmp_path / "sweep"
    copy_run(run, sweep / "0")
    loop = sweep / "loop" / "a"
    loop.mkdir(parents=True)
    for name in ("x", "y", "z"):  # each a way back up: 3^40 paths before ELOOP if followed
        (loop / name).symlink_to("..")
    start = time.monotonic()
    assert find_runs(sweep) == [sweep / "0"]
    assert time.monotonic() - start < 2
    start = time.monotonic()
    out = run_border(["report", str(sweep), "--x", "opt_steps"], tmp_path, timeout=60)
    assert out.returncode == 0 and "(1 run)" in " ".join(out.stdout.split()), out.stderr
    assert time.monotonic() - start < 30  # mostly Python's start; the search itself is instant


def test_report_and_errors_escape_terminal_sequences_read_from_files(tmp_path):
    sweep = tmp_path / "sweep"
    crafted = sweep / "job\x1b[2J"
    claim(crafted, ["seed=0", "x=\x1b]0;TITLE-INJECTED\x07\x1b[31mRED"])
    write_result(crafted, "\x1b[5mfailed", error=RuntimeError("boom \x1b[2J"))
    plain = sweep / "plain"
    claim(plain, ["seed=1"])
    write_result(plain, "completed", {"best_return": "\x1b[2J", "final_return": 1.0})
    out = run_border(["report", str(sweep), "--runs"], tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout + out.stderr
    for escaped in ("job\\x1b[2J", "\\x1b]0;TITLE-INJECTED\\x07", "boom \\x1b[2J"):
        assert escaped in out.stdout, (escaped, out.stdout)
    out = run_border(["eval", str(tmp_path / "no\x1b[2Jsuch")], tmp_path, timeout=120)
    assert out.returncode == 2 and "\x1b" not in out.stderr and "no\\x1b[2Jsuch" in out.stderr


def _checkpoint(root: Path, name: str, opt_steps: int, value: float) -> None:
    save_checkpoint(
        root,
        name,
        policy={"w": torch.full((2,), value)},
        agent_state={},
        state=TrainerState(opt_steps, 0, 0, {}, {}, {}, {}, best_return=value),
        config={"seed": 0},
        meta={"opt_steps": opt_steps, "best_return": value},
    )


def test_a_best_abandoned_twice_keeps_both(tmp_path):
    root = tmp_path / "checkpoints"
    _checkpoint(root, "000000100", 100, 10.0)
    _checkpoint(root, "000000200", 200, 20.0)
    _checkpoint(root, "best", 150, 500.0)
    first = tree(root / "best")
    assert [p.name for p in set_aside_newer(root, 100)] == ["000000200", "best"]
    _checkpoint(root, "best", 120, 50.0)  # the new timeline's first best, above its 10
    second = tree(root / "best")
    assert set_aside_newer(root, 150) == []  # saved before the resume point: stays
    assert [p.name for p in set_aside_newer(root, 100)] == ["best.2"]
    assert tree(root / "abandoned" / "best") == first
    assert tree(root / "abandoned" / "best.2") == second


def test_resuming_an_older_checkpoint_keeps_the_later_best_byte_identical(run, tmp_path):
    root = run / "checkpoints"
    assert math.isinf(load_checkpoint(root / "000000100").state.best_return)
    assert json.loads((root / "best" / "meta.json").read_text())["opt_steps"] > 100
    best = tree(root / "best")
    # the resumed timeline's first evaluation (at 150) beats its best so far (none): a new best
    train(make_config(tmp_path, f"resume={root / '000000100'}"), overrides=["trainer.max_opts=200"])
    assert json.loads((root / "best" / "meta.json").read_text())["opt_steps"] == 150
    assert tree(root / "abandoned" / "best") == best
