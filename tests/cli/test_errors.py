"""Every ``border`` command reads its arguments with one parser (``cli/errors.OneLineParser``): a
bad argument is one error line naming the command and its help, exit status 2, never argparse's
usage lines."""

from __future__ import annotations

import pytest

from border_py.cli.main import main

BAD = {
    "train": [["--bogus"], ["--cfg", "everything"]],
    "eval": [[], ["run", "--bogus"]],
    "report": [[], ["runs", "--x", "episodes"]],
    "tune": [[], ["space", "--n-trials", "many"], ["space", "--n-jobs", "all"]],
    "export": [[], ["run", "--format", "numpy"], ["run", "-f", "numpy", "-o", "m", "--bogus"]],
    "push": [["run"], ["run", "--repo", "me/x", "--episodes", "ten"]],
    "pull": [[], ["me/x", "--bogus"]],
}


@pytest.mark.parametrize(
    ("command", "args"), [(c, a) for c, cases in BAD.items() for a in cases], ids=str
)
def test_a_bad_argument_is_one_line_and_exit_2(command, args, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written; if it were, not into the checkout
    assert main([command, *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1, err
    assert err.startswith(f"border: error: border {command}: ")
    assert err.rstrip().endswith(f"(see border {command} --help)")
    assert list(tmp_path.iterdir()) == []


def test_the_line_says_what_is_wrong(capsys):
    assert main(["report", "runs", "--x", "episodes"]) == 2
    assert "argument --x: invalid choice: 'episodes'" in capsys.readouterr().err
    assert main(["tune", "space", "--n-jobs", "all"]) == 2
    assert "argument --n-jobs: 'all': a whole number, or 'auto'" in capsys.readouterr().err
    assert main(["train", "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err
    assert main(["tune"]) == 2  # the overrides are optional: only the space is missing
    assert "the following arguments are required: space (" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["train", "eval", "report", "tune", "export"])
def test_the_line_escapes_terminal_sequences_and_redacts_secrets(command, capsys):
    """argparse echoes an unrecognized argument as it is; through the one line it is escaped and
    redacted (train, report and tune used to print argparse's message raw)."""
    bad = ["--\x1b[2J", "--uri=postgresql://u:S3CRET@db/m"]
    first = {"train": [], "eval": ["run"], "report": ["runs"], "tune": ["space"]}
    first["export"] = ["run", "-f", "numpy", "-o", "out"]
    assert main([command, *first[command], *bad]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "S3CRET" not in err, err
    assert "\\x1b[2J" in err and "postgresql://u:***@db/m" in err, err
