"""Where a study lives: the study dir's journal by default, an older study's SQLite file, or the
storage given with ``--storage``; a study dir's journal, SQLite file and trials/ are never opened
through a link."""

from __future__ import annotations

import os

import pytest

from border_py.errors import ConfigError
from border_py.tuning.storage import JOURNAL_FILE, SQLITE_FILE, locate, open_storage
from border_py.tuning.tuner import TRIALS

from ..conftest import run_border

optuna = pytest.importorskip("optuna", reason="the [tune] extra is not installed")


def test_the_default_is_the_journal_and_an_older_sqlite_study_stays_where_it_is(tmp_path):
    assert locate(tmp_path, None) == str(tmp_path / JOURNAL_FILE)
    (tmp_path / SQLITE_FILE).touch()  # a study dir of an earlier border tune
    assert locate(tmp_path, None) == f"sqlite:///{tmp_path / SQLITE_FILE}"
    (tmp_path / JOURNAL_FILE).touch()  # both: the journal is the study's (it was made later)
    assert locate(tmp_path, None) == str(tmp_path / JOURNAL_FILE)


def test_a_given_storage_is_a_url_or_a_journal_path_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = "postgresql://me:pw@db:5432/optuna"
    assert locate(tmp_path / "study", url) == url
    assert locate(tmp_path / "study", "runs/my.journal") == str(tmp_path / "runs" / "my.journal")
    with pytest.raises(ConfigError) as err:
        locate(tmp_path / "study", str(tmp_path))
    assert str(err.value) == (
        f"--storage {tmp_path}: a directory; give a journal file path or a database URL"
        " (sqlite:///study.db, postgresql://...)"
    )


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_a_study_written_through_one_storage_object_is_read_through_another(tmp_path, kind):
    location = str(tmp_path / "j.log") if kind == "journal" else f"sqlite:///{tmp_path / 'x.db'}"
    study = optuna.create_study(study_name="s", storage=open_storage(location))
    trial = study.ask()
    trial.set_user_attr("run_dir", "/r/0")
    study.tell(trial, 1.5)
    again = optuna.load_study(study_name="s", storage=open_storage(location))
    (seen,) = again.get_trials()
    assert seen.value == 1.5 and seen.user_attrs == {"run_dir": "/r/0"}


def test_a_storage_that_cannot_be_opened_is_one_line(tmp_path):
    with pytest.raises(ConfigError) as err:
        open_storage("nosuchdb://me:secret@host/x")
    message = str(err.value)
    assert message.startswith("--storage nosuchdb://me:***@host/x: ") and "\n" not in message
    assert "secret" not in message
    with pytest.raises(ConfigError) as err:
        open_storage(str(tmp_path / "no" / "such" / "dir" / "j.log"))
    assert "No such file or directory" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", [JOURNAL_FILE, SQLITE_FILE])
def test_a_link_planted_as_the_journal_or_the_sqlite_file_is_refused(tmp_path, name):
    """Optuna appends to the journal with a plain open (SQLite opens its file the same way): a
    planted link is refused in one line before anything opens it, its target untouched; a
    dangling one too (Optuna would create its target)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    study = tmp_path / "study"
    study.mkdir()
    (study / name).symlink_to(victim)
    with pytest.raises(ConfigError) as err:
        locate(study, None)
    assert str(err.value) == (
        f"{study / name}: is a symbolic link; border never follows links in a run, sweep or study"
        " dir (put the file or dir itself there, or remove the link)"
    )
    (study / name).unlink()
    (study / name).symlink_to(tmp_path / "missing")
    with pytest.raises(ConfigError):
        locate(study, None)
    assert victim.read_text() == "precious\n" and not (tmp_path / "missing").exists()


def test_a_fifo_or_dir_as_the_journal_is_refused(tmp_path):
    os.mkfifo(tmp_path / JOURNAL_FILE)  # reading it would block
    with pytest.raises(ConfigError) as err:
        locate(tmp_path, None)
    assert str(err.value).startswith(f"{tmp_path / JOURNAL_FILE}: not a regular file")
    os.unlink(tmp_path / JOURNAL_FILE)
    (tmp_path / SQLITE_FILE).mkdir()
    with pytest.raises(ConfigError) as err:
        locate(tmp_path, None)
    assert str(err.value).startswith(f"{tmp_path / SQLITE_FILE}: not a regular file")


@pytest.mark.slow
@pytest.mark.parametrize("name", [JOURNAL_FILE, TRIALS])
def test_border_tune_refuses_a_study_dir_with_a_planted_link(tmp_path, name):
    """``border tune`` on a study dir whose journal (or trials/ dir) is a link: one line, exit 2,
    the link's target untouched and nothing written into the study dir."""
    victim = tmp_path / "victim"
    if name == TRIALS:
        victim.mkdir()
    else:
        victim.write_text("precious\n")
    study = tmp_path / "study"
    study.mkdir()
    (study / name).symlink_to(victim)
    out = run_border(
        ["tune", "dqn_cartpole", "--study-dir", str(study), "--n-trials", "1"], tmp_path, 120
    )
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line == (
        f"border: error: {study / name}: is a symbolic link; border never follows links in a run,"
        " sweep or study dir (put the file or dir itself there, or remove the link)"
    )
    assert os.listdir(study) == [name]
    assert (victim.read_text() == "precious\n") if name != TRIALS else os.listdir(victim) == []
