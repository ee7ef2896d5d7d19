"""Text read from a run's files reaches the terminal as plain text: no terminal sequence (ESC,
OSC 8 links, a screen clear), no rich markup, no character that reorders or hides text (bidi
overrides and isolates, zero-width ones); and a number of any size fits within 20 characters, so
that ``border report``'s table keeps every column."""

from __future__ import annotations

import io
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from border_py.cli.main import main
from border_py.errors import NUMBER_WIDTH, number_text, printable
from border_py.recorders import console

from ..conftest import run_border
from ..reports.synthetic import make_run
from .crafted import copy_run

# a title change and a screen clear, an OSC 8 link in rich markup, a right-to-left override, a
# zero-width space and a byte-order mark
ATTACK = "[link=https://evil.example/x]400[/link]\x1b]0;PWNED\x07\x1b[2J\u202eevil\u200b\ufeff"
SHOWN = r"[link=https://evil.example/x]400[/link]\x1b]0;PWNED\x07\x1b[2J\u202eevil\u200b\ufeff"
TERMINAL = {"TTY_COMPATIBLE": "1", "FORCE_COLOR": "1", "COLUMNS": "200"}  # rich: a wide terminal
STYLE = re.compile(r"\x1b\[[0-9;]*m")  # rich's own colours and styles
# a key name of a saved config: an OSC 8 link (a terminal shows "click" linking to the URL)
EVIL_KEY = "\x1b]8;;http://evil\x07click\x1b]8;;\x07"
EVIL_SHOWN = r"\x1b]8;;http://evil\x07click\x1b]8;;\x07"
WANDB = "border_py.recorders.wandb.WandbRecorder"


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


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        # tag characters: "evil" spelled invisibly, and the cancel tag
        (
            "a\U000e0065\U000e0076\U000e0069\U000e006c\U000e007fb",
            r"a\U000e0065\U000e0076\U000e0069\U000e006c\U000e007fb",
        ),
        ("f\u2061x\u2062y\u2063z\u2064", r"f\u2061x\u2062y\u2063z\u2064"),  # invisible operators
        ("pass\u00adword", r"pass\xadword"),  # a soft hyphen
        ("a\u180eb", r"a\u180eb"),  # the Mongolian vowel separator
        ("\u115f\u1160\u3164\uffa0", r"\u115f\u1160\u3164\uffa0"),  # the Hangul fillers
        ("\ue000\U000f0000\U0010fffd", r"\ue000\U000f0000\U0010fffd"),  # private use
        ("\U000e0080\U0010ffff", r"\U000e0080\U0010ffff"),  # unassigned
        ("\ud800", r"\ud800"),  # a lone surrogate (a file name's undecodable byte)
        ("\x00\x7f\x85\r\x0b\x0c", r"\x00\x7f\x85\x0d\x0b\x0c"),  # controls but tab, newline
    ],
)
def test_printable_escapes_every_character_of_a_hidden_category(text, shown):
    assert printable(text) == shown


def test_printable_keeps_text_as_it_is():
    text = "héllo wörld ✓ 日本語 한국어 Ελληνικά עברית العربية 😀👍🏽🇫🇷 é\u00a0\u3000\t\n"
    assert printable(text) == text  # letters, marks, emoji (with modifiers, flags), spaces


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


def _log_through(handler: logging.Handler) -> None:
    """Log, through ``handler`` alone, a line naming :data:`EVIL_KEY` (as a resume's warning
    does, by ``%s``) and a traceback whose message holds it."""
    logger = logging.getLogger("border_py.test_terminal_text")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("resume: the saved %s is not used", f"recorder.{EVIL_KEY}.mode")
        try:
            raise ValueError(f"bad {EVIL_KEY}")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def _plain_log(text: str) -> None:
    """Assert that ``text`` (a log's bytes, rich's own styles taken out) holds no ESC and no BEL,
    shows :data:`EVIL_KEY` escaped, and keeps the traceback's lines."""
    text = STYLE.sub("", text)
    assert "\x1b" not in text and "\x07" not in text
    assert f"recorder.{EVIL_SHOWN}.mode" in re.sub(r"\s", "", text)
    lines = [line.strip() for line in text.splitlines()]  # rich pads them
    assert any(line.endswith("Traceback (most recent call last):") for line in lines)
    assert f"ValueError: bad {EVIL_SHOWN}" in lines


@pytest.mark.parametrize("terminal", [False, True], ids=["plain", "rich"])
def test_the_console_log_handler_escapes_whatever_a_call_site_passes(terminal, monkeypatch, capsys):
    """``border train``'s console handler (Hydra's ``job_logging``, and ``border push``'s and
    ``border tune``'s): rich on a terminal, plain lines elsewhere."""
    screen = io.StringIO()
    monkeypatch.setattr(console, "_console", Console(file=screen, force_terminal=terminal))
    _log_through(console.log_handler())
    _plain_log(screen.getvalue() if terminal else capsys.readouterr().err)


def test_train_logs_lines_and_a_childs_lines_are_escaped(tmp_path):
    """train.log's formatter (:class:`RedactingFormatter`, also of ``border tune``'s trials), and
    a child process's log (:func:`init_child`)."""
    from border_py.files import LogFile
    from border_py.recorders.console import PLAIN_FORMAT
    from border_py.secrets import RedactingFormatter

    handler = LogFile(tmp_path / "train.log")
    handler.setFormatter(RedactingFormatter(PLAIN_FORMAT))
    _log_through(handler)
    handler.close()
    _plain_log((tmp_path / "train.log").read_text())

    child = (
        "import logging; from border_py.processes.children import init_child;"
        "init_child('actor-0'); log = logging.getLogger('border_py.actors');"
        f"log.warning('env %s', {EVIL_KEY!r}); log.error('a\\nb\\tc')"
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stderr and "\x07" not in out.stderr
    assert f"[actor-0][WARNING] - env {EVIL_SHOWN}\n" in out.stderr
    assert "[actor-0][ERROR] - a\nb\tc\n" in out.stderr  # newlines and tabs stay


@pytest.mark.slow
@pytest.mark.parametrize("env", [{}, TERMINAL], ids=["plain", "rich"])
def test_a_resumes_lines_escape_the_key_names_of_the_saved_config(trained, tmp_path, env):
    """A crafted run whose saved W&B recorder is named with an OSC 8 link: a real resume warns
    that its saved ``mode`` is not used, naming the key (before Hydra starts, through logging's
    last resort; then in the run, through the console handler and into ``train.log``). Neither
    stderr's bytes (plain lines, or rich on a terminal) nor ``train.log`` holds an ESC or a BEL;
    both show the name escaped."""
    run = copy_run(trained, tmp_path / "run")
    (run / "result.json").unlink()  # as a preempted job leaves it
    for config_file in run.glob("checkpoints/*/config.json"):
        config = json.loads(config_file.read_text())
        config["recorder"][EVIL_KEY] = {"_target_": WANDB, "mode": "online"}
        config_file.write_text(json.dumps(config))
    out = run_border(
        ["train", f"resume={run}", "trainer.max_opts=400", "progress=false"],
        tmp_path,
        env={"WANDB_MODE": "disabled", **env},
    )
    assert out.returncode == 0, out.stderr
    shown = f"recorder.{EVIL_SHOWN}.mode='online'isnotused"
    for text in (STYLE.sub("", out.stderr), Path(run / "train.log").read_text()):
        assert "\x1b" not in text and "\x07" not in text
        assert shown in re.sub(r"\s", "", text)
