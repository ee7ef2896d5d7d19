"""Every code block of README.md and docs/ runs here, or says why not (see :mod:`.blocks`).

The fast tier checks the markers and the excerpts; the slow tier runs the commands: check and
transcript lines in two processes (half each, at once), each run block in a directory of its own
at a tiny budget, its lines (and those of the blocks that continue it) in one process.
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from ..conftest import run_border, selected_cases, two_at_a_time
from .blocks import (
    REPO,
    TINY,
    Block,
    all_blocks,
    as_check,
    as_run,
    base_env,
    blocks,
    command_env,
    commands,
    problems,
    run_chains,
    transcript,
    with_examples,
)

HERE = Path(__file__).parent
RUN = run_chains(all_blocks())


def test_every_block_runs_or_says_why_not():
    found = [problem for block in all_blocks() for problem in problems(block)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("block", all_blocks("excerpt"), ids=lambda b: b.name)
def test_an_excerpt_is_part_of_its_file(block: Block):
    source = (REPO / block.arg).read_text()
    if block.lang == "yaml":
        assert contained(yaml.safe_load(block.text), yaml.safe_load(source)), block.name
        return
    lines = iter(line.rstrip() for line in source.splitlines())
    missing = [
        line for line in block.text.splitlines() if line.strip() and line.rstrip() not in lines
    ]
    assert not missing, f"{block.name}: not in {block.arg} (in this order): {missing[0]!r}"


def test_a_block_without_a_marker_or_a_reason_is_named(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nborder train\n```\n"
        "<!-- test: skip -->\n```\nout\n```\n"
        "<!-- test: run -->\n```bash\nrm -rf outputs\n```\n"
        "<!-- test: check -->\n```bash\nborder eval runs/a\n```\n"
        "<!-- test: run -->\n```bash\npip install x  # fine\nborder train \\\n  seed=1\n```\n"
    )
    found = [problem for block in blocks(page) for problem in problems(block)]
    assert [problem.split(": ", 1)[1][:20] for problem in found] == [
        "no `<!-- test: run|c",
        "`test: skip` needs i",
        "`rm -rf outputs` is ",
        "`border eval runs/a`",
    ]
    assert commands(blocks(page)[-1])[1].argv == ["border", "train", "seed=1"]


def test_a_sweep_is_checked_at_its_first_values():
    argv = ["border", "train", "-m", "seed=0,1", "resume=auto", "w=[{a:1,b:2}]", "x='a,b'"]
    single = ["border", "train", "seed=0", "w=[{a:1,b:2}]", "x='a,b'", "--cfg", "job"]
    assert as_check(argv) == single
    assert as_check(["border", "train", "--help"]) == ["border", "train", "--help"]


def test_a_run_gets_the_tiny_budget_of_its_command():
    assert as_run(["border", "train", "seed=1"])[-len(TINY) :] == TINY
    assert as_run(["border", "train", "resume=runs/a"])[-1] == "trainer.max_opts=40"
    assert as_run(["border", "tune", "x"])[-1] == "trainer=serial"
    assert as_run(["border", "report", "runs/a"]) == ["border", "report", "runs/a"]


def test_example_paths_stand_for_the_blocks_own_runs(tmp_path):
    run = tmp_path / "outputs" / "2030-01-01" / "10-00-00"
    (run / "checkpoints" / "000000020").mkdir(parents=True)
    (run / "checkpoints" / "000000010").mkdir()
    words = ["border", "eval", "outputs/2026-11-22/10-00-00/checkpoints/000050000", "/scratch/x"]
    assert with_examples(words, tmp_path) == [
        "border",
        "eval",
        str(run / "checkpoints" / "000000010"),
        f"{tmp_path}/scratch/x",
    ]


def contained(part: object, whole: object) -> bool:
    """Whether ``part`` is ``whole`` with some mapping keys left out."""
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(
            key in whole and contained(value, whole[key]) for key, value in part.items()
        )
    return part == whole


def a_block_dir(path: Path) -> Path:
    """A fresh directory for a block's commands, with ``my_pkg`` and ``my_conf`` in it."""
    for name in ("my_pkg", "my_conf"):
        shutil.copytree(HERE / name, path / name, ignore=shutil.ignore_patterns("__pycache__"))
    return path


@pytest.mark.slow
def test_checked_commands_compose_and_transcripts_say_what_the_pages_show(tmp_path):
    cwd = a_block_dir(tmp_path)
    env = base_env(cwd)
    items, expected = [], []
    for block in all_blocks("check"):
        for command in commands(block):
            if command.argv[:1] == ["border"]:
                argv = with_examples(as_check(command.argv), cwd)
                items.append({"argv": argv[1:], "env": command.env})
                expected.append((block, command.argv, None))
    for block in all_blocks("transcript"):
        for argv, lines in transcript(block):
            items.append({"argv": argv[1:], "env": {}})
            expected.append((block, argv, lines))
    half = len(items) // 2  # two processes at once: CI's machine has two cores
    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = pool.map(lambda part: in_one_process(part, cwd, env), [items[:half], items[half:]])
        results = [result for part in parts for result in part]
    failures = []
    for (block, argv, lines), result in zip(expected, results, strict=True):
        stderr = result["stderr"].strip().splitlines()
        if lines is None and result["rc"] not in (0, None):
            failures.append(f"{block.name}: `{shlex.join(argv)}` failed: {result['stderr'][-800:]}")
        elif lines is not None and stderr[-len(lines) :] != lines:
            failures.append(f"{block.name}: `{shlex.join(argv)}` said:\n{result['stderr'][-800:]}")
    assert not failures, "\n".join(failures)


def in_one_process(items: list[dict], cwd: Path, env: dict[str, str]) -> list[dict]:
    """The results of many quick ``border`` lines, run by :mod:`.in_process`."""
    out = subprocess.run(
        [sys.executable, str(HERE / "in_process.py")],
        input=json.dumps(items),
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def run_chain(chain: list[Block], root: Path) -> None:
    """Run a block and the blocks that continue it in one directory under ``root``."""
    cwd = a_block_dir(root / "block")
    with BorderLines(cwd, root / "border.log") as lines:
        for block in chain:
            if block.lang == "python":
                run_python(block, cwd)
            else:
                run_bash(block, cwd, lines)


@pytest.fixture(scope="module")
def ran_chains(request, tmp_path_factory) -> dict[str, Exception | None]:
    """The chains of the run blocks this session selected, run two at a time (tests/conftest.py
    ``two_at_a_time``), each in a dir of its own: the name of its first block -> what it raised."""
    chains = [
        case["chain"] for case in selected_cases(request, "test_a_run_block_runs_at_a_tiny_budget")
    ]
    errors = two_at_a_time(lambda chain: run_chain(chain, tmp_path_factory.mktemp("chain")), chains)
    return dict(zip((chain[0].name for chain in chains), errors, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("chain", RUN, ids=lambda chain: chain[0].name)
def test_a_run_block_runs_at_a_tiny_budget(chain: list[Block], ran_chains):
    error = ran_chains[chain[0].name]
    if error is not None:
        raise error


def test_a_block_that_continues_runs_after_the_one_before_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- test: run -->\n```bash\nborder train\n```\n"
        "<!-- test: run continues -->\n```python\nprint(1)\n```\n"
        "<!-- test: run -->\n```bash\nborder eval x\n```\n"
        "<!-- test: run later -->\n```bash\nborder eval x\n```\n"
    )
    found = blocks(page)
    assert [[b.line for b in chain] for chain in run_chains(found[:3])] == [[2, 6], [10]]
    assert problems(found[3]) == [
        f"{found[3].name}: `test: run` takes nothing or `continues`, not 'later'"
    ]
    with pytest.raises(ValueError, match="with no run block before it"):
        run_chains(found[1:2])


class BorderLines:
    """The process that runs a run chain's ``border`` lines one after another in ``cwd``
    (``in_process.py --serve``, started at the first line): torch, Hydra and border-py are
    imported once, not once a line (~4 s of CPU each). Each line is ``border``'s own ``main``
    with the line's words: its exit status, stdout and stderr come back; what its child processes
    write goes to ``log``."""

    def __init__(self, cwd: Path, log: Path) -> None:
        self.cwd, self.log = cwd, log
        self.proc: subprocess.Popen | None = None

    def run(self, argv: list[str], timeout: float = 240) -> dict:
        """``border <argv>``'s ``rc``, ``stdout`` and ``stderr`` (``rc`` 0 or None: success)."""
        if self.proc is None:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "in_process.py"), "--serve", str(self.log)],
                cwd=self.cwd,
                env={**os.environ, **base_env(self.cwd)},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "env": {}}) + "\n")
        self.proc.stdin.flush()
        with selectors.DefaultSelector() as ready:
            ready.register(self.proc.stdout, selectors.EVENT_READ)
            answered = ready.select(timeout)
        reply = self.proc.stdout.readline() if answered else ""
        log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
        assert reply, f"`border {shlex.join(argv)}`: no answer in {timeout} s; its log:\n{log}"
        return json.loads(reply)

    def __enter__(self) -> BorderLines:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def run_bash(block: Block, cwd: Path, lines: BorderLines) -> None:
    """Run a bash block's ``border`` lines in ``cwd``, each at a tiny budget: those in the block's
    own environment in ``lines``, a line with its own (``PYTHONPATH=... border ...``, or after an
    ``export``) in a process of its own."""
    env = base_env(cwd)
    for command in commands(block):
        if command.export:
            env = command_env(env, command.env)
            continue
        if command.argv[0] != "border":
            continue  # a tool's line: blocks.NOT_RUN says why
        argv = with_examples(as_run(command.argv), cwd)
        line_env = command_env(env, command.env)
        if line_env == base_env(cwd):
            out = lines.run(argv[1:])
            ok, stderr = out["rc"] in (0, None), out["stderr"]
        else:
            ran = run_border(argv[1:], cwd, env=line_env)
            ok, stderr = ran.returncode == 0, ran.stderr
        assert ok, f"{block.name}: `{shlex.join(argv)}`:\n{stderr[-2000:]}"


def run_python(block: Block, cwd: Path) -> None:
    """Run a python block as a script, every ``compose("train", ...)`` given the tiny budget."""
    prelude = (
        "import hydra\n"
        "_compose = hydra.compose\n"
        "def _tiny(config_name=None, overrides=None, **kwargs):\n"
        f"    extra = {TINY!r} if config_name == 'train' else []\n"
        "    overrides = [*(overrides or []), *extra]\n"
        "    return _compose(config_name=config_name, overrides=overrides, **kwargs)\n"
        "hydra.compose = _tiny\n"
    )
    script = cwd / "block.py"
    script.write_text(prelude + block.text + "\n")
    out = subprocess.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env={**os.environ, **base_env(cwd)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert out.returncode == 0, f"{block.name}:\n{out.stderr[-2000:]}"
