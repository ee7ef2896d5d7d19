"""Tab completion: Hydra's install scripts for ``border``, and the query they run at each <TAB>
(``border -sc query=SHELL`` with the typed line in ``COMP_LINE``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from border_py.cli.main import COMMANDS

from ..conftest import run_border


def _query(tmp_path, line: str, shell: str = "bash", *, cursor: int | None = None) -> list[str]:
    """What ``border -sc query=SHELL`` answers for ``line``, run as the installed script runs it."""
    point = str(len(line) if cursor is None else cursor)
    out = run_border(
        ["-sc", f"query={shell}"],
        tmp_path,
        timeout=60,
        env={"COMP_LINE": line, "COMP_POINT": point},
    )
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return [w for w in out.stdout.splitlines() if w] if shell == "fish" else out.stdout.split()


def test_the_query_completes_the_groups_options_and_keys_of_border_train(tmp_path):
    assert _query(tmp_path, "border train agent=d") == ["agent=dqn"]
    assert _query(tmp_path, "border train agent=") == [
        "agent=custom",
        "agent=dqn",
        "agent=iqn",
        "agent=r2d2",
        "agent=sac",
    ]
    assert _query(tmp_path, "border train trainer=serial trainer.max_o") == ["trainer.max_opts="]
    assert _query(tmp_path, "border train env=gym env.i") == ["env.id="]
    everything = _query(tmp_path, "border train ")
    assert {"agent=", "env=", "experiment=", "debug=", "seed=", "trainer."} <= set(everything)
    # the words before the cursor (COMP_POINT) are completed, not the whole line
    assert _query(tmp_path, "border train agent=d seed=1", cursor=len("border train agent=d")) == [
        "agent=dqn"
    ]
    # fish's script reads one completion a line
    assert _query(tmp_path, "border train replay_buffer=", "fish") == [
        "replay_buffer=prioritized",
        "replay_buffer=sequence",
        "replay_buffer=sequence_prioritized",
        "replay_buffer=uniform",
    ]


def test_the_query_completes_options_never_the_bases_they_compose(tmp_path):
    """``trainer/_loop.yaml`` and the other bases are files of their groups, no options."""
    assert _query(tmp_path, "border train trainer=") == ["trainer=async", "trainer=serial"]
    assert _query(tmp_path, "border train actor_manager=") == [
        "actor_manager=default",
        "actor_manager=ray",
    ]
    assert _query(tmp_path, "border train env=_") == []


def test_the_query_completes_subcommands_and_leaves_paths_to_the_shell(tmp_path):
    assert {"eval", "report", "train", "tune"} <= set(_query(tmp_path, "border "))
    assert _query(tmp_path, "border ") == sorted(COMMANDS)
    assert _query(tmp_path, "border t") == sorted(c for c in COMMANDS if c.startswith("t"))
    assert _query(tmp_path, "border tr") == ["train"]
    assert _query(tmp_path, "border eval out") == []  # bash completes file names itself
    (tmp_path / "outputs" / "multirun").mkdir(parents=True)
    (tmp_path / "out.csv").touch()
    assert _query(tmp_path, "border report out", "fish") == ["out.csv", "outputs/"]  # fish: told
    assert _query(tmp_path, "border report outputs/m", "fish") == ["outputs/multirun/"]
    assert _query(tmp_path, "border train resume=./outp") == ["resume=./outputs"]  # Hydra's own
    # a line Hydra cannot parse yet completes to nothing, and prints nothing into the shell
    assert _query(tmp_path, "border train --cf") == []
    assert _query(tmp_path, "border train agent.lr=[1,") == []


def test_bad_completion_requests_fail_in_one_line(tmp_path):
    for args, said in (
        (["train", "-sc", "install=tcsh"], "-sc install=tcsh: expected one of install=SHELL"),
        (["-sc"], "-sc : expected one of install=SHELL, uninstall=SHELL, query=SHELL"),
        (["-sc", "query=bash"], "-sc query=bash: COMP_LINE is not set"),
    ):
        out = run_border(args, tmp_path, timeout=60)
        lines = out.stderr.splitlines()
        assert out.returncode == 2 and len(lines) == 1, out.stderr
        assert lines[0].startswith(f"border: error: {said}") and out.stdout == ""


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_install_prints_hydras_script_for_the_border_command(tmp_path, shell):
    out = run_border(["train", "-sc", f"install={shell}"], tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "hydra_bash_completion()" in out.stdout
    assert "$helper -sc query=bash" in out.stdout  # the query the script runs at each <TAB>
    assert out.stdout.rstrip().endswith("-F hydra_bash_completion border")  # not `border train`


def test_fish_install_and_uninstall_name_the_border_command(tmp_path):
    out = run_border(["train", "-sc", "install=fish"], tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert 'eval "$cmd -sc query=fish"' in out.stdout
    assert "complete -c border -x -a '(hydra_fish_completion)'" in out.stdout
    out = run_border(["train", "-sc", "uninstall=fish"], tmp_path, timeout=60)
    assert out.returncode == 0 and "complete -e -c border" in out.stdout, out.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_installed_bash_script_completes_border_train_and_uninstalls(tmp_path):
    bin_dir = tmp_path / "bin"  # `border` on PATH, as the console script would be
    bin_dir.mkdir()
    (bin_dir / "border").write_text(f'#!/bin/sh\nexec {sys.executable} -m border_py.cli "$@"\n')
    (bin_dir / "border").chmod(0o755)
    script = """
        eval "$(border train -sc install=bash)"
        complete -p border
        COMP_LINE="border train agent=d"; COMP_POINT=${#COMP_LINE}
        COMP_WORDS=(border train agent=d); COMP_CWORD=2
        hydra_bash_completion && echo "completed: ${COMPREPLY[*]}"
        eval "$(border train -sc uninstall=bash)"
        complete -p border 2> /dev/null || echo "no rule left"
    """
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "complete -o default -o nospace -F hydra_bash_completion border",
        "completed: agent=dqn",
        "no rule left",
    ], out.stderr
