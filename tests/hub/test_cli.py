"""``border push`` and ``border pull``'s bad input: one error line each, a non-zero exit, and
nothing written."""

from __future__ import annotations

import sys

import pytest

from border_py.cli.main import main


def error_line(capsys) -> str:
    """The one line the command printed on stderr."""
    (line,) = capsys.readouterr().err.strip().splitlines()
    return line


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["push", "somewhere"],
            "border: error: border push: the following arguments are required: --repo"
            " (see border push --help)",
        ),
        (
            ["push", "somewhere", "--repo", "no-slash"],
            "border: error: --repo no-slash: not a Hub repo id; <owner>/<name> of letters,"
            " digits, '-', '_' and '.' (e.g. your-name/cartpole-dqn)",
        ),
        (
            ["push", "somewhere", "--repo", "me/a b"],
            "border: error: --repo me/a b: not a Hub repo id; <owner>/<name> of letters,"
            " digits, '-', '_' and '.' (e.g. your-name/cartpole-dqn)",
        ),
        (
            ["push", "somewhere", "--repo", "me/x", "--episodes", "0"],
            "border: error: --episodes 0: must be an int from 1 to 10,000",
        ),
        (
            ["push", "somewhere", "--repo", "me/x", "agent.lr=1"],
            "border: error: agent.lr: border push takes trust=[...] and check_resources only as overrides",
        ),
        (
            ["pull", "me/x/y"],
            "border: error: border pull me/x/y: not a Hub repo id; <owner>/<name> of letters,"
            " digits, '-', '_' and '.' (e.g. your-name/cartpole-dqn)",
        ),
    ],
)
def test_bad_arguments_are_one_line(argv, line, capsys):
    assert main(argv) == 2
    assert error_line(capsys) == line


def test_an_unknown_format_is_one_line_naming_the_formats(capsys):
    assert main(["push", "somewhere", "--repo", "me/x", "--format", "pickle"]) == 2
    line = error_line(capsys)  # argparse's own wording (its quotes vary with Python's version)
    assert line.startswith("border: error: border push: argument --format: invalid choice:")
    assert all(fmt in line for fmt in ("pickle", "numpy", "torchscript", "onnx"))


def test_a_dir_that_is_not_a_run_is_one_line(tmp_path, capsys):
    assert main(["push", str(tmp_path), "--repo", "me/x", "--dry-run", str(tmp_path / "out")]) == 2
    assert error_line(capsys) == (
        f"border: error: {tmp_path}: not a border-py run or checkpoint directory (no"
        " checkpoints/ inside)"
    )
    assert list(tmp_path.iterdir()) == []  # neither the dry-run dir nor a temporary one


def test_a_dry_run_dir_with_files_in_it_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    assert main(["push", "no-such-run", "--repo", "me/x", "--dry-run", str(out)]) == 2
    assert error_line(capsys) == (
        f"border: error: --dry-run {out}: exists and is not an empty dir; name a new or empty"
        " dir (border never writes over your files)"
    )
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere")
    assert main(["push", "no-such-run", "--repo", "me/x", "--dry-run", str(link)]) == 2
    assert error_line(capsys) == (
        f"border: error: --dry-run {link}: is a symbolic link; name a new or empty dir"
    )


def test_a_dir_that_cannot_be_written_is_one_line(tmp_path, capsys):
    assert main(["push", str(tmp_path), "--repo", "me/x", "--dry-run", "/proc/border-card"]) == 2
    assert error_line(capsys) == (
        "border: error: --dry-run /proc/border-card: cannot write there (No such file or directory)"
    )
    assert main(["pull", "me/x", "-o", "/proc/border-pulled"]) == 2
    assert error_line(capsys) == (
        "border: error: -o /proc/border-pulled: cannot write there (No such file or directory)"
    )


def test_pull_into_a_dir_with_files_in_it_is_refused(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep").write_text("mine")
    assert main(["pull", "me/x", "-o", str(tmp_path / "x")]) == 2
    assert error_line(capsys).startswith(f"border: error: -o {tmp_path / 'x'}: exists and is not")


def test_without_huggingface_hub_the_error_names_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if the extra were missing
    missing = (
        "(import of huggingface_hub halted; None in sys.modules): pip install 'border-py[hub]'"
    )
    assert main(["push", "run", "--repo", "me/x"]) == 2
    assert error_line(capsys) == f"border: error: border push needs huggingface_hub {missing}"
    assert main(["pull", "me/x", "-o", "pulled"]) == 2
    assert error_line(capsys) == f"border: error: border pull needs huggingface_hub {missing}"
    assert list(tmp_path.iterdir()) == []  # nothing evaluated, downloaded or written
