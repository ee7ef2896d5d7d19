"""Files border writes: published whole or not at all (a failed write leaves the earlier file and
no temporary one), ``border eval``'s result never lost to an unwritable dir, one permission
policy (the umask's), ``attempts/<n>`` numbers that never collide."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from border_py import train
from border_py.errors import RunError
from border_py.reports.report import report
from border_py.runs.results import write_result
from border_py.runs.run_dir import claim, set_aside_attempt

from ..conftest import BORDER, make_config, run_border
from .crafted import TINY, tiny_run, tree


def _small_files(limit: int):
    """A ``preexec_fn``: files of the child may not grow past ``limit`` bytes (EFBIG, which
    root cannot bypass as it bypasses permissions)."""

    def limit_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_files


def test_a_write_that_fails_leaves_the_earlier_file_and_no_temporary_one(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_result(run_dir, "interrupted", {"opt_steps": 100})
    before = tree(run_dir)
    script = (
        "import sys; from border_py.runs.results import write_result;"
        " write_result(sys.argv[1], 'completed', {'notes': 'x' * 100000})"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_small_files(4096),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert out.returncode == 1, out.stderr
    assert f"[Errno 27] File too large: '{run_dir / 'result.json'}'" in out.stderr
    assert tree(run_dir) == before  # the earlier result.json, nothing else


def test_a_result_json_that_cannot_be_written_at_the_end_fails_in_one_line(tmp_path):
    run_dir = tmp_path / "run"

    def block_result(opt_steps: int, env_steps: int, value: float) -> bool:
        (run_dir / "result.json").mkdir(exist_ok=True)  # the rename onto it fails (EISDIR)
        return False

    with pytest.raises(RunError) as err:
        train(make_config(tmp_path, *TINY), on_eval=block_result)
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{run_dir / 'result.json'}: could not be written (Is a directory)")
    assert "checkpoints are intact" in line
    names = sorted(p.name for p in run_dir.iterdir())
    assert not [n for n in names if n.endswith(".tmp")], names
    assert {"checkpoints", "train.log", "result.json"} <= set(names)


def _one_error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def test_eval_prints_its_result_then_fails_to_write_in_one_line(run, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a dir\n")
    before = tree(tmp_path)
    out = run_border(["eval", str(run), "eval.n_episodes=2", f"eval.out={blocker}/evals"], tmp_path)
    assert out.returncode == 1 and "return (mean ± std)" in out.stdout, out.stderr
    line = _one_error_line(out)
    assert line.startswith(f"border: error: {blocker}/evals: cannot write eval_")
    assert "(Not a directory)" in line and "eval.out=<dir>" in line
    # the default dir (the best checkpoint's) under a file size limit: the same, no temporary file
    out = subprocess.run(
        [*BORDER, "eval", str(run), "eval.n_episodes=2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=_small_files(64),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert out.returncode == 1 and "return (mean ± std)" in out.stdout, out.stderr
    line = _one_error_line(out)
    assert f"{run / 'checkpoints' / 'best'}: cannot write eval_" in line
    assert "(File too large)" in line and "eval.out=<dir>" in line
    assert tree(tmp_path) == before


def test_eval_out_takes_the_record_elsewhere(run, tmp_path):
    before = tree(run)
    out = run_border(
        ["eval", str(run), "eval.n_episodes=2", f"eval.out={tmp_path / 'evals' / 'new'}"], tmp_path
    )
    assert out.returncode == 0, out.stderr
    (written,) = (tmp_path / "evals" / "new").iterdir()
    assert written.name.startswith("eval_") and written.suffix == ".json"
    assert tree(run) == before  # nothing written into the run
    out = run_border(["eval", str(run), "eval.out=3"], tmp_path)
    assert out.returncode == 2 and "eval.out=3: must be null or a dir" in _one_error_line(out)


def test_a_video_dir_that_cannot_be_made_fails_before_any_episode(run, tmp_path):
    pytest.importorskip("moviepy", reason="the [video] extra (moviepy) is not installed")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a dir\n")
    args = ["eval", str(run), "eval.video=true", f"eval.out={blocker}/evals"]
    out = run_border(args, tmp_path)
    assert out.returncode == 1 and "return" not in out.stdout, out.stdout  # no episode played
    # (SDL, which renders the frames, may say something of its own on stderr)
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("border:")]
    assert "Traceback" not in out.stderr, out.stderr
    assert line.startswith(f"border: error: {blocker}/evals: cannot record videos there")
    assert "(Not a directory)" in line and "eval.out=<dir>" in line


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_every_file_and_dir_of_a_run_follows_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        tiny_run(tmp_path)
        run_dir = tmp_path / "run"
        report(run_dir, run_dir / "report.csv", None, "opt_steps")
    finally:
        os.umask(previous)
    modes: dict[str, set[int]] = {"file": set(), "dir": set()}
    for top, dirs, files in os.walk(run_dir):
        for name in dirs + files:
            mode = os.lstat(Path(top) / name).st_mode
            modes["dir" if stat.S_ISDIR(mode) else "file"].add(stat.S_IMODE(mode))
    assert modes == {"file": {0o666 & ~umask}, "dir": {0o777 & ~umask}}
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o777 & ~umask
    kinds = {p.name for p in run_dir.iterdir()}
    assert {".border_lock", ".border_run", "report.png", "report.csv", "result.json"} <= kinds


def test_attempt_numbers_never_collide(tmp_path):
    run_dir = tmp_path / "run"
    attempts = run_dir / "attempts"
    (attempts / "2").mkdir(parents=True)  # attempt 1 was removed by hand
    (attempts / "2" / "train.log").write_text("attempt 2\n")
    kept = tree(attempts / "2")
    for n in (3, 4):
        claim(run_dir, ["seed=1"])
        write_result(run_dir, "failed", error=RuntimeError(f"attempt {n} killed"))
        assert set_aside_attempt(run_dir) == attempts / str(n)
        names = sorted(p.name for p in (attempts / str(n)).iterdir())
        assert names == [".border_run", "result.json"]
        (attempts / "²").mkdir(exist_ok=True)  # a digit, but not a number of ours
    assert tree(attempts / "2") == kept
