"""What a pulled folder holds: the files ``border push`` writes, by name and kind, and nothing else.

A pull downloads the repo into a hidden dir and moves into the new folder only regular files at
the paths of :data:`KEPT`, an ``export/policy.py`` or ``export/env.py`` only when it is byte for
byte the one this border-py writes (:func:`keep`); everything else stays out and is named in one
line. The folder then holds no Python file but border-py's own ``policy.py`` and ``env.py``: no ``__init__.py``, ``numpy.py`` or
``numpy/`` that Python, started in the folder or beside it, would import in place of a module
(a dir on ``sys.path`` is searched first). Nor is the folder named after a module
(:func:`check_not_a_module`): ``border pull attacker/numpy`` writes ``./numpy-policy``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from border_py._version import __version__
from border_py.deploy.export import DESCRIPTION, ENV_PY, NUMPY_FILES, env_source, policy_source
from border_py.errors import ConfigError, printable
from border_py.files import NotRegular, make_dir, present
from border_py.runs.timeline import POLICY_FILES

__all__ = [
    "CARD",
    "CHECKPOINT",
    "CURVE",
    "EXPORT",
    "EXPORT_FILES",
    "REPLAY",
    "RESULTS",
    "check_not_a_module",
    "keep",
    "left_out_line",
    "pull_dir",
]

# the folder border push uploads (see border_py.hub.folder), by name
CARD = "README.md"
CHECKPOINT = "checkpoint"
EXPORT = "export"
CURVE = "learning_curve.png"
REPLAY = "replay.mp4"
RESULTS = "results.json"
EXPORT_FILES = {"torchscript": "policy.torchscript.pt", "onnx": "policy.onnx"}  # numpy: a dir
PULLED = "-policy"  # border pull's default dir: the repo's name with this, never a module's name
POLICY_PY = f"{EXPORT}/policy.py"
# the Python files a pull keeps, each only as this border-py writes it (byte for byte)
SOURCES = {
    POLICY_PY: policy_source,
    f"{EXPORT}/{ENV_PY}": env_source,
    **{f"{EXPORT}/{name}.{ENV_PY}": env_source for name in EXPORT_FILES.values()},
}
KEPT = frozenset(
    {
        CARD,
        RESULTS,
        CURVE,
        REPLAY,
        *(f"{CHECKPOINT}/{name}" for name in POLICY_FILES),
        *(f"{EXPORT}/{name}" for name in NUMPY_FILES),
        *(f"{EXPORT}/{name}" for name in EXPORT_FILES.values()),
        *(f"{EXPORT}/{name}.{DESCRIPTION}" for name in EXPORT_FILES.values()),
        *SOURCES,
    }
)
HUB_FILES = (".gitattributes",)  # the Hub writes it into every repo: left out without a word
HUB_CACHE = ".cache/huggingface/"  # huggingface_hub's own records of a download into a dir
NAMED = 2000  # characters of left-out names the line holds; the rest are counted


def pull_dir(repo_id: str) -> str:
    """The dir ``border pull`` writes ``repo_id`` to by default, which the card's snippets name:
    the repo's name and :data:`PULLED` (a name no ``import`` can take for a module)."""
    return f"{repo_id.rpartition('/')[2]}{PULLED}"


def check_not_a_module(dest: Path, option: str) -> None:
    """Refuse a destination named as a top-level module Python can import (``numpy``, ``json``,
    ``torch``): Python started beside it, as the next step is, would search it first.

    Raises:
        ConfigError: one line naming ``option``, ``dest`` and a name to use instead.
    """
    name = dest.expanduser().absolute().name
    if not name.isidentifier():
        return  # e.g. cartpole-dqn-policy: no import statement can name it
    spec = importlib.util.find_spec(name) if name not in sys.modules else None
    known = name in sys.modules or name in sys.stdlib_module_names
    if known or (spec is not None and spec.origin is not None):  # a namespace dir runs nothing
        raise ConfigError(
            f"{option} {dest}: named as the module {name}, which Python started beside it would"
            f" look for there first; name another dir (e.g. {name}-policy)"
        )


def _refusal(rel: str, path: Path) -> str | None:
    """Why the downloaded file ``path`` (at ``rel`` in the repo) is not kept; None: kept."""
    try:
        regular = present(path)
    except NotRegular:  # a link or a FIFO (the pull refuses a download holding one)
        regular = False
    if rel not in KEPT or not regular:
        return rel
    if rel in SOURCES:
        source = SOURCES[rel]()
        same = path.stat().st_size == len(source) and path.read_bytes() == source
        if not same:
            return f"{rel} (not the {rel.rpartition('/')[2]} border-py {__version__} writes)"
    return None


def keep(download: Path, folder: Path) -> list[str]:
    """Move the files of ``download`` that a pull keeps (see the module's docstring) to the same
    paths in ``folder``; return the others, sorted and printable (the Hub's own
    ``.gitattributes`` and ``huggingface_hub``'s records are left out unnamed)."""
    left_out = []
    for top, _, files in os.walk(download):  # never descends into a linked dir
        for name in files:
            path = Path(top) / name
            rel = path.relative_to(download).as_posix()
            if rel in HUB_FILES or rel.startswith(HUB_CACHE):
                continue
            refused = _refusal(rel, path)
            if refused is not None:
                left_out.append(printable(refused))
                continue
            make_dir((folder / rel).parent)
            os.rename(path, folder / rel)
    return sorted(left_out)


def left_out_line(dest: Path, left_out: list[str]) -> str:
    """The one line that names what a pull of ``dest`` left out (as many as :data:`NAMED`
    characters hold, then how many more)."""
    shown: list[str] = []
    for name in left_out:
        if shown and sum(len(n) + 2 for n in shown) + len(name) > NAMED:
            break
        shown.append(name)
    named = ", ".join(shown)
    more = f" and {len(left_out) - len(shown)} more" if len(left_out) > len(shown) else ""
    return (
        f"left out of {dest}: {named}{more} (a pull keeps only the files border push writes, as"
        " this border-py writes them)"
    )
