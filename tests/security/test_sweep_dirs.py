"""A sweep's dir is checked as a run's dir is, before Hydra writes into it: Hydra writes
``multirun.yaml`` and each job's ``.hydra/`` and log by plain ``open``, so a link there (a job dir
that is a link too) is refused in one line, its target untouched, for a new sweep as for
``resume=auto``. What another user could write in is asked only of a dir that was there before
the command: one Hydra or border makes has the umask's mode (``umask 000``: 0777)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from border_py.errors import ConfigError
from border_py.runs.run_dir import check_sweep, claim

from ..conftest import BORDER
from .crafted import TINY, tree

REFUSED = "is a symbolic link; border never follows links"


def border(args: list[str], cwd: Path, umask: int = 0o022) -> subprocess.CompletedProcess:
    """``border <args>`` in ``cwd`` under ``umask``."""
    return subprocess.run(
        [*BORDER, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        umask=umask,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )


def one_line(out: subprocess.CompletedProcess) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    return lines[0]


# --- links in a sweep dir ------------------------------------------------------------------------


@pytest.mark.parametrize("fresh", [True, False], ids=["new-sweep", "resume-auto"])
@pytest.mark.parametrize("link", ["multirun.yaml", "0", "0/train.log", "1/.hydra"])
def test_a_link_in_a_sweep_dir_or_a_job_dir_is_refused(tmp_path, link, fresh):
    sweep, outside = tmp_path / "sweep", tmp_path / "outside"
    (sweep / "1").mkdir(parents=True)
    (sweep / "0").mkdir()
    outside.mkdir()
    if link == "0":
        (sweep / "0").rmdir()
    (sweep / link).symlink_to(outside)
    with pytest.raises(ConfigError, match=f"^{sweep / link}: {REFUSED}"):
        check_sweep(sweep, fresh)


def test_an_earlier_sweep_is_refused_for_a_new_sweep_and_continued_by_resume_auto(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0" / "checkpoints").mkdir(parents=True)
    with pytest.raises(ConfigError, match=f"^hydra.sweep.dir={sweep}: holds the jobs of an"):
        check_sweep(sweep, fresh=True)
    check_sweep(sweep, fresh=False)


def test_a_job_dir_every_user_can_write_in_is_refused(tmp_path):
    sweep = tmp_path / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "0").chmod(0o777)
    with pytest.raises(ConfigError, match=rf"^hydra.sweep.dir={sweep / '0'}: every user can"):
        check_sweep(sweep, fresh=False)


@pytest.mark.slow
@pytest.mark.parametrize("resume", [[], ["resume=auto"]], ids=["new-sweep", "resume-auto"])
@pytest.mark.parametrize("link", ["multirun.yaml", "0"])
def test_hydra_never_writes_through_a_link_in_an_explicit_sweep_dir(tmp_path, link, resume):
    """``multirun.yaml -> target`` would get Hydra's config; ``0 -> elsewhere`` the job's
    ``.hydra/``, log and run. Refused in one line before any job runs; the targets untouched."""
    sweep, target, elsewhere = tmp_path / "sweep", tmp_path / "target.txt", tmp_path / "elsewhere"
    sweep.mkdir()
    elsewhere.mkdir()
    target.write_text("the user's own\n")
    (sweep / link).symlink_to(target if link == "multirun.yaml" else elsewhere)
    args = ["train", "-m", "seed=0", *TINY, *resume, f"hydra.sweep.dir={sweep}"]
    line = one_line(border(args, tmp_path))
    assert line.startswith(f"border: error: {sweep / link}: {REFUSED}")
    assert target.read_text() == "the user's own\n" and tree(elsewhere) == {}


# --- dirs the command makes ----------------------------------------------------------------------


def test_a_dir_claimed_as_it_is_made_takes_the_umasks_mode(tmp_path):
    """Under ``umask 000`` a run's new dir is 0777: it is the run's own, and claimed; a dir that
    was there before with that mode is refused (``test_recorder_stores.py``)."""
    kept = os.umask(0)
    try:
        claim(tmp_path / "runs" / "new")
    finally:
        os.umask(kept)
    assert stat.S_IMODE((tmp_path / "runs" / "new").stat().st_mode) == 0o777
    assert (tmp_path / "runs" / "new" / ".border_run").is_file()


@pytest.mark.slow
@pytest.mark.parametrize(
    "how", [[], ["run_dir=made/by/hydra"], ["-m", "seed=0"]], ids=["default", "new", "sweep"]
)
def test_border_trains_under_umask_000_in_the_dirs_it_makes(tmp_path, how):
    """A filesystem whose every dir is 0777 (WSL's /mnt/c, CIFS, FAT) reads as ``umask 000``:
    the dirs Hydra and border make for the command are 0777, and the run trains in them."""
    out = border(["train", *how, *TINY], tmp_path, umask=0)
    assert out.returncode == 0, out.stderr
    made = [p for p in tmp_path.rglob(".border_run")]
    assert len(made) == 1 and stat.S_IMODE(made[0].parent.stat().st_mode) == 0o777
