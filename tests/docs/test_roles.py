"""The API reference's docstrings: their reST roles become links (docs/hooks/roles.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import griffe

from .blocks import REPO

MODULE_A = '''"""Module a: :class:`Thing`, :meth:`~Thing.go`, :func:`pkg.b.helper`, :data:`missing`."""

from pkg.b import helper


class Thing:
    """Goes with :func:`helper`."""

    def go(self):
        """Calls :meth:`go` again."""
'''


def loaded(tmp_path: Path) -> griffe.Module:
    """A small package, loaded by Griffe with the extension as mkdocstrings loads border_py."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text('"""Parts: :mod:`.a`, :mod:`~pkg.b`."""\n')
    (package / "a.py").write_text(MODULE_A)
    (package / "b.py").write_text("def helper():\n    pass\n")
    spec = importlib.util.spec_from_file_location("roles", REPO / "docs/hooks/roles.py")
    assert spec is not None and spec.loader is not None
    roles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(roles)
    extensions = griffe.load_extensions(roles.ReSTRoles)
    return griffe.load("pkg", search_paths=[tmp_path], extensions=extensions)


def link(identifier: str, shown: str) -> str:
    return f'<autoref identifier="{identifier}" optional>`{shown}`</autoref>'


def test_each_role_links_to_what_it_names_from_where_the_docstring_sits(tmp_path):
    package = loaded(tmp_path)
    assert package.docstring.value == f"Parts: {link('pkg.a', '.a')}, {link('pkg.b', 'b')}."
    assert package["a"].docstring.value == (
        f"Module a: {link('pkg.a.Thing', 'Thing')}, {link('pkg.a.Thing.go', 'go')}, "
        f"{link('pkg.b.helper', 'pkg.b.helper')}, `missing`."
    )
    assert package["a.Thing"].docstring.value == f"Goes with {link('pkg.b.helper', 'helper')}."
    assert package["a.Thing.go"].docstring.value == f"Calls {link('pkg.a.Thing.go', 'go')} again."
