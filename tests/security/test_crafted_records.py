"""Crafted files in a run dir other than links: FIFOs, records of the wrong shape, YAML alias
bombs, markup and mathtext in text read back, links deep in the run, an abandoned timeline, a
saved store of another MLflow. Each: refused in one line, or skipped, never a hang, a traceback
or a write outside the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from border_py.cli.main import main
from border_py.runs.results import read_result
from border_py.runs.resume import original_overrides

from ..conftest import BORDER, run_border
from .crafted import copy_run, tree


def _one_line(capsys, *words: str) -> str:
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("border: error: ") and all(w in line for w in words), line
    return line


@pytest.mark.parametrize(
    "name", ["result.json", ".border_run", "tensorboard/events.out.tfevents.9"]
)
def test_a_fifo_in_a_run_never_blocks_resume_eval_or_report(run, tmp_path, capsys, name):
    (run / name).unlink(missing_ok=True)
    os.mkfifo(run / name)
    before = tree(tmp_path)
    start = time.monotonic()
    assert main(["train", f"resume={run}", "trainer.max_opts=400"]) == 2
    _one_line(capsys, name.split("/")[-1], "neither a file nor a dir")
    assert main(["eval", str(run)]) == 2
    _one_line(capsys, "neither a file nor a dir")
    assert main(["report", str(run)]) == 2  # its only run is skipped: nothing to report
    assert "skipped" in capsys.readouterr().err
    assert time.monotonic() - start < 60
    assert tree(tmp_path) == before


def test_records_of_the_wrong_shape_are_read_as_none_or_refused(run, tmp_path, capsys):
    (run / "result.json").write_text("[1]")
    assert read_result(run) is None
    (run / "result.json").write_text('{"status": "interrupted", "overrides": [1, ["x"], "seed=3"]}')
    assert read_result(run)["overrides"] == ["seed=3"]
    (run / ".border_run").write_text('{"overrides": [{"a": 1}, "seed=3"]}')
    assert original_overrides(run) == ["seed=3"]
    assert main(["report", str(run)]) == 0, capsys.readouterr().err
    best = run / "checkpoints" / "best" / "config.json"
    best.write_text("{}")
    assert main(["eval", str(run)]) == 2
    _one_line(capsys, str(best), "not border-py's (no seed, env, agent)")
    best.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["eval", str(run)]) == 2
    _one_line(capsys, str(best), "corrupt checkpoint file", "nested too deep")


def test_a_yaml_alias_bomb_in_hydras_overrides_is_never_expanded(tmp_path):
    (tmp_path / ".hydra").mkdir()
    rows = ['a: &a ["xxxxxxxxxx"]'] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(8)
    ]
    (tmp_path / ".hydra" / "overrides.yaml").write_text("\n".join(rows) + "\n")
    start = time.monotonic()
    assert original_overrides(tmp_path) == []  # not a list of strings: nothing is read from it
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- &x seed=1\n- [*x, *x]\n- *x\n")
    assert original_overrides(tmp_path) == ["seed=1", "seed=1"]
    assert time.monotonic() - start < 5


def test_markup_and_mathtext_read_from_a_run_are_shown_as_text(run, tmp_path, capsys):
    sweep = tmp_path / "sweep"
    for seed in (0, 1):
        job = sweep / str(seed)
        copy_run(run, job)
        record = json.loads((job / "result.json").read_text())
        record["overrides"] = [
            f"seed={seed}",
            "note=[/bad][link=https://evil.example]x",
            "m=$\\foo$",
        ]
        (job / "result.json").write_text(json.dumps(record))
        (job / ".border_run").unlink()
    assert main(["report", str(sweep)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "\x1b]8;" not in out and "evil.example" in out  # shown, never a terminal hyperlink
    assert (sweep / "report.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name", [".hydra/hydra.yaml", "tensorboard/sub/v.mp4"])
def test_a_link_deep_in_a_run_is_refused(run, tmp_path, capsys, name):
    secret = tmp_path / "secret"
    secret.write_text("key")
    (run / name).parent.mkdir(parents=True, exist_ok=True)
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(secret)
    assert main(["eval", str(run)]) == 2
    _one_line(capsys, str(run / name), "is a symbolic link")
    assert main(["train", f"resume={run}", "trainer.max_opts=400"]) == 2
    _one_line(capsys, str(run / name), "is a symbolic link")


def test_an_abandoned_checkpoint_evaluates_but_never_resumes(run, tmp_path, capsys):
    abandoned = run / "checkpoints" / "abandoned" / "000000300"
    abandoned.parent.mkdir()
    os.replace(run / "checkpoints" / "000000300", abandoned)
    assert main(["eval", str(abandoned), "eval.n_episodes=1"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["train", f"resume={abandoned}", "trainer.max_opts=400"]) == 2
    _one_line(capsys, str(abandoned), "move it back into checkpoints/")
    assert not (run / "checkpoints" / "checkpoints").exists()


@pytest.mark.slow
def test_a_resume_auto_sweep_with_a_link_in_a_job_is_refused_before_hydra_writes(tmp_path):
    """Hydra writes multirun.yaml, each job's .hydra/ and train.log with plain open() before any
    of border's code runs in the job: a link there is refused before the sweep starts."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    hydra_dir = tmp_path / "sweep" / "0" / ".hydra"
    hydra_dir.mkdir(parents=True)
    (hydra_dir / "config.yaml").symlink_to(victim)
    before = tree(tmp_path)
    out = run_border(
        ["train", "-m", "seed=0", "resume=auto", f"hydra.sweep.dir={tmp_path / 'sweep'}"],
        tmp_path,
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert f"{hydra_dir / 'config.yaml'}: is a symbolic link" in line
    assert tree(tmp_path) == before and victim.read_text() == "precious\n"


@pytest.mark.slow
def test_one_ctrl_c_stops_border_eval(run, tmp_path):
    """Only train and tune stop gracefully (they poll for it): eval and report stop at the first
    Ctrl-C (one that `timeout` sends too), in one line with exit 130. The episode's env hangs in
    its first step (its flag file says it got there), so the Ctrl-C comes while eval plays."""
    hung = tmp_path / "hung"
    proc = subprocess.Popen(
        [
            *BORDER,
            "eval",
            str(run),
            "env.id=tests.hang_env:HangOnce-v0",
            "env.kwargs.hang_after=1",
            f"env.kwargs.flag={hung}",
            "trust=[tests.hang_env]",
            f"eval.out={tmp_path / 'out'}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not hung.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hung.exists() and proc.poll() is None, proc.communicate()
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert err.strip().splitlines() == ["border: error: interrupted"]
    assert not (tmp_path / "out").exists()
