"""``border pull`` of a crafted repo: a pulled folder is data, and stays data through every next
step border prints, writes into the card or the export's README.

The Hub is replaced by a local copy (``pull``'s ``fetch``) of a pushed folder with files planted
in it: Python files named as modules (``numpy/__init__.py``, ``json.py``, ``export/numpy.py``,
...), an ``__init__.py``, an altered ``export/policy.py`` and other extra files. Each planted file
writes a marker when it is imported; each next step runs in a fresh ``python -c`` in the dir its
user would be in, and no marker may appear.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

import border_py.cli.push
from border_py.cli.main import main
from border_py.hub.remote import pull

REPO = "attacker/numpy"  # a repo named as a module: main wrote it to ./numpy
PULLED = "numpy-policy"
# the planted files: every module the next steps import (border_py, numpy, torch, json, ...),
# as a module and as a package, at the root and in the dirs the snippets name
PLANTED = [
    "__init__.py",
    "numpy/__init__.py",
    "json.py",
    "torch/__init__.py",
    "gymnasium.py",
    "yaml.py",
    "border_py/__init__.py",
    "checkpoint/__init__.py",
    "checkpoint/numpy.py",
    "export/__init__.py",
    "export/numpy.py",
    "export/json.py",
]
EXTRA = ["notes.txt", "checkpoint/optimizer.pt", "export/weights.npz.bak"]


def plant(folder: Path, markers: Path, paths: list[str]) -> None:
    """Python files at ``paths`` in ``folder``, each writing ``markers/<path>`` when imported."""
    for rel in paths:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        marker = markers / rel.replace("/", "_")
        path.write_text(f"open({str(marker)!r}, 'w').close()\n")


def crafted(source: Path, markers: Path, policy_py: bool = False, altered: str = "policy.py"):
    """A ``fetch`` giving ``source`` with :data:`PLANTED`, :data:`EXTRA` and, with
    ``policy_py``, an ``export/<altered>`` (``policy.py``, or ``env.py``) that writes a marker too."""

    def fetch(repo_id: str, revision: str | None, local_dir: Path) -> None:
        for path in source.rglob("*"):
            if path.is_file():
                to = local_dir / path.relative_to(source)
                to.parent.mkdir(parents=True, exist_ok=True)
                to.write_bytes(path.read_bytes())
        plant(local_dir, markers, PLANTED)
        for rel in EXTRA:
            (local_dir / rel).write_bytes(b"extra")
        if policy_py:
            genuine = (local_dir / "export" / altered).read_text()
            marker = markers / f"export_{altered}"
            code = genuine + f"\nopen({str(marker)!r}, 'w').close()\n"
            (local_dir / "export" / altered).write_text(code)

    return fetch


def files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def border_pull(where: Path, fetch, monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """``border pull <args>`` run in ``where`` with the Hub replaced by ``fetch``."""
    monkeypatch.chdir(where)
    monkeypatch.setattr(border_py.cli.push, "pull", functools.partial(pull, fetch=fetch))
    status = main(["pull", *args])
    out, err = capsys.readouterr()
    return status, out, err


def python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -c code`` in ``cwd``, as a user starts it (``cwd`` first on ``sys.path``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def minimal_repo(folder: Path, target: str = "border_py.agents.dqn.DQN") -> None:
    """What a pull checks a repo for: a card and a checkpoint's weights, config and meta."""
    (folder / "checkpoint").mkdir(parents=True)
    (folder / "README.md").write_text("# a card\n")
    (folder / "checkpoint" / "policy.pt").write_bytes(b"x")
    config = {"seed": 0, "env": {"id": "CartPole-v1"}, "agent": {"_target_": target}}
    (folder / "checkpoint" / "config.json").write_text(json.dumps(config))
    (folder / "checkpoint" / "meta.json").write_text("{}")


@pytest.mark.parametrize("name", ["numpy", "json", "torch", "yaml", "border_py", "email"])
def test_a_dir_named_as_a_module_is_refused_in_one_line(name, tmp_path, monkeypatch, capsys):
    def never(repo_id, revision, local_dir):
        raise AssertionError("nothing is downloaded")

    status, out, err = border_pull(tmp_path, never, monkeypatch, capsys, REPO, "-o", name)
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [
        f"border: error: -o {name}: named as the module {name}, which Python started beside it"
        f" would look for there first; name another dir (e.g. {name}-policy)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_a_pull_keeps_only_what_border_push_writes(tmp_path, monkeypatch, capsys):
    source, markers, where = tmp_path / "repo", tmp_path / "markers", tmp_path / "user"
    for path in (markers, where):
        path.mkdir()
    minimal_repo(source)

    status, out, err = border_pull(
        where, crafted(source, markers), monkeypatch, capsys, REPO
    )  # the default -o
    assert status == 0, err
    assert out.splitlines()[0] == f"pulled: {where / PULLED}"
    assert [p.name for p in where.iterdir()] == [PULLED]  # no ./numpy, no temporary dir
    assert files(where / PULLED) == sorted(
        ["README.md", "checkpoint/config.json", "checkpoint/meta.json", "checkpoint/policy.pt"]
    )
    (line,) = [line for line in err.splitlines() if "left out of" in line]
    listed = line.split(f"left out of {where / PULLED}: ", 1)[1]
    assert listed == (
        f"{', '.join(sorted(PLANTED + EXTRA))} (a pull keeps only the files border push writes,"
        " as this border-py writes them)"
    )
    # Python started beside the folder, or in it, imports none of its files
    for cwd in (where, where / PULLED):
        done = python("import numpy, json, yaml, gymnasium, torch", cwd)
        assert done.returncode == 0, done.stderr
    assert list(markers.iterdir()) == []


def test_text_the_pull_prints_from_the_config_is_plain(tmp_path, monkeypatch, capsys):
    source = tmp_path / "repo"
    minimal_repo(source, target="my_pkg.Agent\x1b]0;PWNED-TITLE\x07\x1b[2J\x1bc")

    def fetch(repo_id, revision, local_dir):
        for path in source.rglob("*"):
            if path.is_file():
                to = local_dir / path.relative_to(source)
                to.parent.mkdir(parents=True, exist_ok=True)
                to.write_bytes(path.read_bytes())

    status, _, err = border_pull(tmp_path, fetch, monkeypatch, capsys, "me/pol", "-o", "p")
    assert status == 0
    assert "\x1b" not in err and "\x07" not in err
    (line,) = err.strip().splitlines()
    assert "my_pkg.Agent\\x1b]0;PWNED-TITLE\\x07\\x1b[2J\\x1bc" in line


@pytest.mark.parametrize(
    ("link", "to"),
    [
        ("wandb/latest-run", "dir"),  # a name a run dir's walk accepts (W&B's own link)
        ("wandb/debug.log", "file"),
        ("checkpoint/policy.pt", "file"),
        ("notes", "dir"),
    ],
)
def test_a_link_anywhere_in_the_download_refuses_the_whole_pull(
    tmp_path, monkeypatch, capsys, link, to
):
    source, where, secret = tmp_path / "repo", tmp_path / "user", tmp_path / "secret"
    where.mkdir()
    secret.mkdir()
    (secret / "id_rsa").write_text("the user's key\n")
    minimal_repo(source)

    def fetch(repo_id, revision, local_dir):
        for path in source.rglob("*"):
            if path.is_file():
                to_path = local_dir / path.relative_to(source)
                to_path.parent.mkdir(parents=True, exist_ok=True)
                to_path.write_bytes(path.read_bytes())
        planted = local_dir / link
        planted.parent.mkdir(parents=True, exist_ok=True)
        planted.unlink(missing_ok=True)
        planted.symlink_to(secret if to == "dir" else secret / "id_rsa")

    status, out, err = border_pull(where, fetch, monkeypatch, capsys, "me/pol", "-o", "p")
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [
        f"border: error: me/pol: {link} in the download is a symbolic link; a pull refuses a"
        " download holding one (nothing was kept)"
    ]
    assert list(where.iterdir()) == []
    assert [p.name for p in secret.iterdir()] == ["id_rsa"]


@pytest.fixture(scope="module")
def pushed(trained, tmp_path_factory) -> Path:
    """``border push --dry-run`` of the tiny run as :data:`REPO`: a genuine folder."""
    out = tmp_path_factory.mktemp("push") / "folder"
    argv = ["push", str(trained), "--repo", REPO, "--dry-run", str(out), "--episodes", "1"]
    assert main(argv) == 0
    return out


def python_blocks(markdown: str) -> list[str]:
    """The card's python code blocks."""
    tokens = MarkdownIt().parse(markdown)
    return [t.content for t in tokens if t.type == "fence" and t.info.strip() == "python"]


def readme_snippet(readme: str) -> str:
    """The export README's snippet: its indented lines."""
    lines = [line for line in readme.splitlines() if line.startswith("    ")]
    return textwrap.dedent("\n".join(lines))


OBS = "obs = [0.01, 0.02, 0.03, 0.04]  # a CartPole observation\nobs_batch = [obs]\n"


@pytest.mark.slow
def test_every_documented_next_step_imports_nothing_from_the_pull(
    pushed, tmp_path, monkeypatch, capsys
):
    markers, where = tmp_path / "markers", tmp_path / "user"
    for path in (markers, where):
        path.mkdir()
    fetch = crafted(pushed, markers)
    status, out, err = border_pull(where, fetch, monkeypatch, capsys, REPO)
    assert status == 0, err
    pulled, load = out.splitlines()
    folder = Path(pulled.removeprefix("pulled: "))
    call = load.removeprefix("load it: ")
    steps = [  # (what, code, where its user is)
        ("the printed line", f"import border_py\n{call}", where),
        ("the printed line, in the folder", f"import border_py\n{call}", folder),
    ]
    card = (folder / "README.md").read_text()
    steps += [(f"the card's block {i}", OBS + b, where) for i, b in enumerate(python_blocks(card))]
    readme = readme_snippet((folder / "export" / "README.txt").read_text())
    steps.append(("the export's README.txt", OBS + readme, folder))
    done = [(what, python(code + "\nprint('ran')", cwd)) for what, code, cwd in steps]
    assert sorted(p.name for p in markers.iterdir()) == []  # nothing planted was imported
    failed = [(what, run.stderr) for what, run in done if run.stdout.strip()[-3:] != "ran"]
    assert not failed and len(done) == 5, failed

    assert folder == where / PULLED
    assert f"border pull {REPO}\n" in card  # the card's first step: what was done above
    assert load == f'load it: border_py.load_policy("{folder}/checkpoint")'
    assert files(folder) == files(pushed)  # the genuine files, export/policy.py included
    (line,) = [line for line in err.splitlines() if "left out of" in line]
    assert "numpy/__init__.py" in line and "export/numpy.py" in line


@pytest.mark.slow
@pytest.mark.parametrize("altered", ["policy.py", "env.py"])
def test_an_altered_policy_py_is_left_out(pushed, tmp_path, monkeypatch, capsys, altered):
    markers = tmp_path / "markers"
    markers.mkdir()
    fetch = crafted(pushed, markers, policy_py=True, altered=altered)
    status, _, err = border_pull(tmp_path, fetch, monkeypatch, capsys, REPO, "-o", "pulled")
    assert status == 0, err
    (line,) = [line for line in err.splitlines() if "left out of" in line]
    assert f"export/{altered} (not the {altered} border-py {border_py.__version__} writes)" in line
    assert files(tmp_path / "pulled") == [f for f in files(pushed) if f != f"export/{altered}"]
    card = (tmp_path / "pulled" / "README.md").read_text()
    load_snippet = python_blocks(card)[0].replace(PULLED, "pulled")
    done = python(load_snippet, tmp_path)
    assert done.returncode == 0, done.stderr
    assert list(markers.iterdir()) == []
