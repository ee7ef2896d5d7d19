"""border_py's contract as a library: every public module says what it offers in ``__all__``, and
every name it offers has its entry in the API reference (docs/09-api/, built by mkdocstrings).

A public module is one whose name and package path have no leading underscore. The command line
(``border_py.cli``) declares ``__all__`` too, but is not documented as API (docs/09-api/index.md
says why).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

SRC = REPO / "src"
API_PAGES = REPO / "docs" / "09-api"
NOT_API = "border_py.cli"  # the commands' internals: the commands are documented in the guide
BLOCK = re.compile(r"^::: (\S+)\s*$", re.MULTILINE)
ANCHOR = re.compile(r'\bid="(border_py[\w.]*)"')

# Run in a fresh interpreter: importing every module has effects a test process should not take
# (border_py.frozen_heap freezes the collector's heap, as the forkserver's last preload).
DECLARED = """
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    names = getattr(module, "__all__", None)
    out[name] = names if not isinstance(names, (list, tuple)) else [
        [str(n), isinstance(n, str) and hasattr(module, n)] for n in names
    ]
print(json.dumps(out))
"""


def public_modules() -> list[str]:
    """Every public module of border_py, from the files under src/ (packages included)."""
    names = []
    for path in sorted((SRC / "border_py").rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts):
            names.append(".".join(parts))
    return names


def documented_modules() -> list[str]:
    """The public modules the API reference documents: all but the command line's."""
    return [name for name in public_modules() if not is_cli(name)]


def is_cli(name: str) -> bool:
    return name == NOT_API or name.startswith(NOT_API + ".")


def is_private(name: str) -> bool:
    """``_x`` is private; ``__x__`` (``__version__``) is a special name, not a private one."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def problems(name: str, declared: object) -> list[str]:
    """What is wrong with module ``name``'s ``__all__`` as :data:`DECLARED` reports it: a list of
    ``[name, exists]`` pairs, or what the module holds instead of a list."""
    if not isinstance(declared, list):
        return [f"{name}: no __all__ (a list of its public names)"]
    found = []
    names = [entry for entry, _ in declared]
    if len(set(names)) != len(names):
        found.append(f"{name}: __all__ names one thing twice")
    for entry, exists in declared:
        if not exists:
            found.append(f"{name}: __all__ names {entry!r}, which the module does not have")
        elif is_private(entry):
            found.append(f"{name}: __all__ names the private {entry!r}")
    return found


def declared_all(modules: list[str], *paths: Path) -> dict[str, object]:
    """Each module's ``__all__`` as :data:`DECLARED` reports it, imported in a fresh interpreter
    (with ``paths`` on its ``sys.path``)."""
    path = os.pathsep.join([*map(str, paths), str(SRC), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", DECLARED, *modules],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_every_public_module_declares_its_public_names():
    declared = declared_all(public_modules())
    found = [problem for name, names in declared.items() for problem in problems(name, names)]
    assert not found, "\n".join(found)
    assert "border_py.agents.dqn" in declared and "border_py.cli.main" in declared


def test_a_module_without_all_or_with_a_bad_name_is_named(tmp_path):
    package = tmp_path / "fake"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kept.py").write_text("__all__ = ['kept', '__version__']\nkept = __version__ = 1\n")
    (package / "silent.py").write_text("def helper(): ...\n")
    (package / "bad.py").write_text(
        "__all__ = ['gone', '_helper', 'kept', 'kept']\n_helper = kept = 1\n"
    )
    declared = declared_all(["fake.kept", "fake.silent", "fake.bad"], tmp_path)
    assert [problems(name, names) for name, names in declared.items()] == [
        [],
        ["fake.silent: no __all__ (a list of its public names)"],
        [
            "fake.bad: __all__ names one thing twice",
            "fake.bad: __all__ names 'gone', which the module does not have",
            "fake.bad: __all__ names the private '_helper'",
        ],
    ]


def api_blocks() -> dict[str, Path]:
    """Every module a ``::: module`` block of the API pages renders, and its page."""
    blocks: dict[str, Path] = {}
    for page in sorted(API_PAGES.glob("*.md")):
        for name in BLOCK.findall(page.read_text()):
            assert name not in blocks, f"{name}: on {blocks[name].name} and {page.name}"
            blocks[name] = page
    return blocks


def test_every_public_module_has_a_block_on_the_api_pages():
    blocks = api_blocks()
    missing = sorted(set(documented_modules()) - set(blocks))
    assert not missing, f"public modules on no page of docs/09-api/: {missing}"
    unknown = sorted(set(blocks) - set(documented_modules()))
    assert not unknown, f"blocks of docs/09-api/ that name no public module: {unknown}"


def anchors(site: Path) -> set[str]:
    """The ids of every object the built API pages document."""
    return {
        anchor
        for page in (site / "09-api").rglob("index.html")
        for anchor in ANCHOR.findall(page.read_text())
    }


@pytest.mark.slow  # builds the whole site: ~7 s on an idle 2-core machine
def test_every_public_name_has_its_entry_in_the_built_api_reference(tmp_path):
    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    ids = anchors(site)
    declared = declared_all(documented_modules())
    wanted = [*declared]
    wanted += [f"{name}.{entry}" for name, names in declared.items() for entry, _ in names]
    missing = [anchor for anchor in wanted if anchor not in ids]
    assert not missing, f"public names without an entry in the API reference: {missing}"
    table = (site / "03-algorithms" / "index.html").read_text()
    assert "agent-table" not in table and "border_py.agents.dqn.DQN" in table
