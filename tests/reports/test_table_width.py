"""``border report``'s tables on 80 columns, on a terminal and in a pipe: no line wider, and
every interval bound printed in full, the same numbers as the CSV's."""

from __future__ import annotations

import csv
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios

import pytest

from border_py.cli.main import main
from border_py.errors import number_text

from ..conftest import BORDER
from .synthetic import add_fresh, make_run, make_sweep
from .test_outputs import CELLS

ESTIMATES = [(f"{p}_mean", f"{p}_ci_low", f"{p}_ci_high") for p in ("final_eval", "final", "best")]
IQMS = [
    (f"{p}_iqm", f"{p}_iqm_ci_low", f"{p}_iqm_ci_high") for p in ("final_eval", "final", "best")
]


@pytest.fixture
def sweep(tmp_path):
    """2 configurations x 3 seeds of returns in the hundreds below zero (wide intervals, minus
    signs), with final evaluations on fresh episodes, and long overrides every run shares."""
    common = ["experiment=dqn_acrobot", "trainer=serial", "trainer.max_env_steps=123456"]
    for g, lr in enumerate(["0.0003", "0.001"]):
        for seed in range(3):
            returns = [-500.0, -300.0 + 37.3 * seed - 50 * g, -120.7 - 61.9 * seed + 11 * g]
            overrides = [*common, f"agent.lr={lr}", f"seed={seed}"]
            run = make_run(tmp_path / "sweep" / f"{g}{seed}", overrides, "Acrobot-v1", returns)
            add_fresh(run, -101.3 - 23.9 * seed - 7 * g, -95.1 - 9.7 * seed)
    return tmp_path / "sweep"


def _intervals(csv_path) -> list[str]:
    """Every ``mean [low, high]`` the groups' CSV holds, as the table writes it."""
    found = []
    for line in csv.DictReader(csv_path.open()):
        for keys in ESTIMATES + IQMS:
            value, low, high = (float(line[k]) for k in keys)
            found.append(f"{number_text(value)} [{number_text(low)}, {number_text(high)}]")
    return found


def _check(out: str, expected: list[str]) -> None:
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    assert "…" not in out, out
    for text in expected:
        assert text in out, f"{text!r} not in\n{out}"


def test_the_groups_table_on_80_columns_shows_every_bound(sweep, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["report", str(sweep), "--csv", str(tmp_path / "g.csv")]) == 0
    out = capsys.readouterr().out
    expected = _intervals(tmp_path / "g.csv")
    assert len(expected) == 12 and len(set(expected)) > 6
    _check(out, expected)
    assert "agent.lr: score" in out and "0.0003" in out and "0.001" in out
    assert "(2 groups, 6 runs)" in " ".join(out.split())  # a long title is wrapped


def test_the_runs_table_on_80_columns_shows_every_score(sweep, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["report", str(sweep), "--runs", "--csv", str(tmp_path / "r.csv")]) == 0
    out = capsys.readouterr().out
    expected = []
    for line in csv.DictReader((tmp_path / "r.csv").open()):
        fresh = (float(line["final_eval_return"]), float(line["final_eval_std"]))
        expected.append(f"final {number_text(fresh[0])} ± {number_text(fresh[1])} (100)")
        expected.append(f"best {number_text(float(line['best_return']))}")
        expected.append(f"final {number_text(float(line['final_return']))}")
    _check(out, expected)


@pytest.mark.slow
def test_a_pipe_shows_every_bound(sweep, tmp_path):
    """stdout a pipe, as ``border report runs | less`` makes it."""
    env = {**os.environ, "COLUMNS": "80"}
    args = [*BORDER, "report", str(sweep), "--csv", str(tmp_path / "g.csv")]
    out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60, check=True)
    _check(out.stdout, _intervals(tmp_path / "g.csv"))


@pytest.mark.slow
def test_an_80_column_terminal_shows_every_bound(sweep, tmp_path):
    """stdout a terminal of 80 columns (a pseudo-terminal, colours on): the text without its
    escape sequences holds every bound."""
    main_fd, child_fd = pty.openpty()
    fcntl.ioctl(child_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "TERM")}
    args = [*BORDER, "report", str(sweep), "--csv", str(tmp_path / "g.csv")]
    proc = subprocess.Popen(args, stdout=child_fd, stderr=subprocess.DEVNULL, env=env)
    os.close(child_fd)
    chunks = []
    while True:  # read as it comes: a full pseudo-terminal would block the report
        ready, _, _ = select.select([main_fd], [], [], 60)
        assert ready, "no output for 60 s"
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:  # the child closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main_fd)
    assert proc.wait(timeout=60) == 0
    text = b"".join(chunks).decode().replace("\r\n", "\n")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
    _check(plain, _intervals(tmp_path / "g.csv"))


def test_the_table_across_tasks_on_80_columns_shows_every_bound(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    sweep = make_sweep(tmp_path / "sweep", CELLS, "agent.lr")
    assert main(["report", str(sweep), "--csv", str(tmp_path / "g.csv")]) == 0
    out = capsys.readouterr().out
    expected = []
    for line in csv.DictReader((tmp_path / "g.csv").open()):
        if line["final_interval"] == "95% stratified bootstrap":
            for keys in (("final_iqm", "final_iqm_ci_low", "final_iqm_ci_high"), ESTIMATES[1]):
                value, low, high = (float(line[k]) for k in keys)
                text = f"{number_text(value, 2)} [{number_text(low, 2)}, {number_text(high, 2)}]"
                expected.append(text)
    assert len(expected) == 4
    _check(out, expected)
