"""A Griffe extension for the API reference: the docstrings' reST roles become links.

border_py's docstrings name other objects as Sphinx does (``:class:`Agent```,
``:func:`border_py.agents.check_agent```, ``:mod:`.worker```, ``:meth:`~RunClock.advance```).
Markdown would show the role as text; this extension (``extensions:`` of the mkdocstrings
handler in mkdocs.yml) rewrites each into the name in code, linked to its entry in the reference
when it has one. The name is resolved as Python would from where the docstring sits (its own
members, its class, its module and what the module imports); a leading ``.`` is relative to the
package, a leading ``~`` shows the last part only. The link is an optional cross-reference: a
name the reference does not document (a private helper, a name out of ``__all__``) stays code
without a link and without a warning.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj):`(?P<target>[^`]+)`")


def identifier(obj: griffe.Object, target: str) -> str | None:
    """The full dotted path ``target`` names from where ``obj``'s docstring sits, or None."""
    if target.partition(".")[0] == obj.package.name:
        return target
    if target.startswith("."):
        module = obj if isinstance(obj, griffe.Module) else obj.module
        package = module.path if module.is_init_module else module.path.rpartition(".")[0]
        return package + target
    first, _, rest = target.partition(".")
    try:
        resolved = obj.resolve(first)
    except (griffe.NameResolutionError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    return f"{resolved}.{rest}" if rest else resolved


def linked(obj: griffe.Object, match: re.Match[str]) -> str:
    """The role ``match`` as code, inside an optional cross-reference when its target resolves."""
    target = match["target"]
    shown = target.lstrip("~")
    if target.startswith("~"):
        shown = shown.rpartition(".")[2]
    code = f"`{shown}`"  # a Markdown code span: the docstring is rendered as Markdown
    path = identifier(obj, target.lstrip("~"))
    if path is None:
        return code
    return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'


def rewrite(obj: griffe.Object) -> None:
    """``obj``'s docstring with each of its roles :func:`linked`."""
    if obj.docstring is not None:
        obj.docstring.value = ROLE.sub(lambda match: linked(obj, match), obj.docstring.value)


class ReSTRoles(griffe.Extension):
    """Rewrites the reST roles of every docstring once the package is loaded: the package's own
    (Griffe calls ``on_package`` for it, ``on_object`` for every object below it) and its
    members'."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        rewrite(pkg)

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        rewrite(obj)
