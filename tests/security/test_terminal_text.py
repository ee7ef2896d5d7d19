"""Text read from a run's files reaches the terminal as plain text: no terminal sequence (ESC,
OSC 8 links, a screen clear), no rich markup, no character that reorders or hides text (bidi
overrides and isolates, zero-width ones); and a number of any size fits within 20 characters, so
that ``border report``'s table keeps every column."""

from __future__ import annotations

import json
import re

import pytest

from border_py.cli.main import main
from border_py.errors import NUMBER_WIDTH, number_text, printable

from ..conftest import run_border
from ..reports.synthetic import make_run
from .crafted import copy_run

# a title change and a screen clear, an OSC 8 link in rich markup, a right-to-left override, a
# zero-width space and a byte-order mark
ATTACK = "[link=https://evil.example/x]400[/link]\x1b]0;PWNED\x07\x1b[2J\u202eevil\u200b\ufeff"
SHOWN = r"[link=https://evil.example/x]400[/link]\x1b]0;PWNED\x07\x1b[2J\u202eevil\u200b\ufeff"
TERMINAL = {"TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "COLUMNS": "200"}  # rich: a wide terminal
STYLE = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colours and styles


def _raw(text: str) -> None:
    """Assert that ``text`` (a command's output) holds none of :data:`ATTACK`'s sequences and
    characters, and shows them escaped."""
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x07" not in text
    assert not {"\u202e", "\u200b", "\ufeff"} & set(text)
    assert SHOWN in re.sub(r"\s", "", STYLE.sub("", text))  # a title may be wrapped


def _columns(text: str) -> list[int]:
    """The widths of the first table's columns, from its top border (``┏━━┳━━━┓``)."""
    (top, *_) = [line for line in STYLE.sub("", text).splitlines() if line.startswith("┏")]
    return [len(cell) for cell in top[1:-1].split("┳")]


def test_printable_escapes_what_reorders_or_hides_text():
    hidden = (
        "\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202d\u202e\u2060\u2066\u2069\ufeff"
    )
    escaped = printable(f"a{hidden}b\x1b[2J\x9b\tc\n")
    assert escaped == (
        r"a\u061c\u200b\u200c\u200d\u200e\u200f\u2028\u2029\u202a\u202d\u202e\u2060\u2066\u2069"
        r"\ufeffb\x1b[2J\x9b" + "\tc\n"
    )
    assert printable("héllo wörld ✓ 日本") == "héllo wörld ✓ 日本"  # other text as it is


@pytest.mark.parametrize(
    ("value", "decimals", "shown"),
    [
        (10**4000, 1, "1.00e+4000"),
        (-(10**300), 1, "-1.00e+300"),
        (1e308, 2, "1.00e+308"),
        (123456, 1, "123456"),
        (12.345, 2, "12.35"),
        (10**19, 1, "10000000000000000000"),
        (float("inf"), 1, "inf"),
        (float("nan"), 1, "nan"),
    ],
)
def test_a_number_is_shown_within_20_characters(value, decimals, shown):
    assert number_text(value, decimals) == shown
    assert len(shown) <= NUMBER_WIDTH


def test_a_4000_digit_number_leaves_the_reports_table_readable(tmp_path, capsys):
    """``summary.env_steps`` of 10^4000 (JSON allows it): the table keeps every column and
    shows the number in 20 characters; the report ends normally (its figure too)."""
    for seed in (0, 1):
        run = make_run(tmp_path / str(seed), [f"seed={seed}"], "CartPole-v1", [1.0, 2.0])
        record = json.loads((run / "result.json").read_text())
        record["summary"] |= {"env_steps": 10**4000, "opt_steps": -(10**4000), "seconds": 1e300}
        (run / "result.json").write_text(json.dumps(record))
    for args in (["report", str(tmp_path), "--runs"], ["report", str(tmp_path)]):
        assert main(args) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert min(_columns(out)) > 2, out  # a border and a space each side at the least
        assert "0" * 21 not in out
    assert main(["report", str(tmp_path), "--runs"]) == 0
    out = capsys.readouterr().out
    assert "1.00e+4000" in out and "-1.00e+4000" in out and "1.00e+300 s" in out


@pytest.mark.slow
def test_text_from_a_runs_files_never_reaches_the_terminal_raw(trained, tmp_path):
    """``border eval`` and ``border report`` on a terminal (rich in colour), given runs whose
    ``meta.json``, ``config.json``, ``result.json`` and ``mlflow_run.json`` hold terminal
    sequences, rich markup with a link and bidi and zero-width characters: the bytes printed hold
    none of them, and the text shows escaped."""
    run = copy_run(trained, tmp_path / "run")
    (run / "mlflow_run.json").write_text(json.dumps({"tracking_uri": ATTACK, "run_id": ATTACK}))
    meta = run / "checkpoints" / "best" / "meta.json"
    meta.write_text(json.dumps(json.loads(meta.read_text()) | {"opt_steps": ATTACK}))
    out = run_border(["eval", str(run), "eval.n_episodes=1"], tmp_path, env=TERMINAL)
    assert out.returncode == 0, out.stderr
    _raw(out.stdout)  # the table's title
    assert "\x1b]" not in out.stderr and "\u202e" not in out.stderr

    config = run / "checkpoints" / "best" / "config.json"
    saved = json.loads(config.read_text())
    saved["agent"]["_target_"] = ATTACK
    config.write_text(json.dumps(saved))
    out = run_border(["eval", str(run), "eval.n_episodes=1"], tmp_path, env=TERMINAL)
    assert out.returncode == 2 and out.stdout == ""
    (line,) = out.stderr.strip().splitlines()
    _raw(line)  # the trust gate's refusal names the target

    sweep = tmp_path / "sweep"
    for job, env_id in enumerate(["CartPole-v1", "CartPole-v1", f"Crafted-v0{ATTACK}"]):
        copy_run(trained, sweep / str(job))
        record = json.loads((sweep / str(job) / "result.json").read_text())
        record["overrides"] = [f"seed={job}", f"note={ATTACK}"] if job < 2 else [f"x={ATTACK}"]
        if job == 2:
            record |= {"status": "failed", "error": {"type": ATTACK, "message": ATTACK}}
            saved = json.loads(config.read_text()) | {"env": {"id": env_id}}
            (sweep / str(job) / "checkpoints" / "best" / "config.json").write_text(
                json.dumps(saved)
            )
        record["summary"]["env_steps"] = 10**4000
        (sweep / str(job) / "result.json").write_text(json.dumps(record))
    for args in ([], ["--runs"]):  # the groups' table (an env id column), the runs' table
        out = run_border(["report", str(sweep), *args], tmp_path, env=TERMINAL)
        assert out.returncode == 0, out.stderr
        _raw(out.stdout)
        assert min(_columns(out.stdout)) > 2
        for text in (out.stdout, out.stderr):
            assert "\x1b]" not in text and "\u202e" not in text
    assert "1.00e+4000" in out.stdout  # the runs' env steps
