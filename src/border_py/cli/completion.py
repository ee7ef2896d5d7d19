"""Tab completion of ``border`` in bash, zsh and fish, by Hydra's own completion plugins
(https://hydra.cc/docs/1.3/tutorials/basic/running_your_app/tab_completion), fitted to a command
with subcommands.

``eval "$(border train -sc install=bash)"`` prints Hydra's bash script, registered for the
``border`` command. At each <TAB> that script runs its command line's first word with
``-sc query=bash`` (``border -sc query=bash``) and the line typed so far in ``COMP_LINE``; fish's
script does the same with ``query=fish``. Here the subcommand is completed, and for
``border train ...`` the word ``train`` is taken out of the line, so that Hydra's plugin completes
the overrides after it (config groups, their options, keys and values) as for any Hydra app. The
other subcommands take paths: bash and zsh complete file names themselves when the answer is
empty; fish, whose script turns file names off, is given the matching paths.
"""

from __future__ import annotations

import io
import os
import re
import sys
from contextlib import redirect_stderr, suppress

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from border_py.cli.config_source import hide_from_listings
from border_py.cli.errors import fail
from border_py.config import config_dir

__all__ = ["FLAGS", "shell_completion"]

REQUESTS = ("install", "uninstall", "query")
SHELLS = ("bash", "zsh", "fish")
FLAGS = ("-sc", "--shell-completion")


def shell_completion(args: list[str], commands: tuple[str, ...]) -> int:
    """``border [train] -sc REQUEST=SHELL``: print the install or uninstall script of ``SHELL``'s
    completion, or (``query``, run by that script) the completions of ``$COMP_LINE``.

    Args:
        args: The command line after ``border`` or ``border train``: ``-sc`` and the request.
        commands: ``border``'s subcommands.
    """
    given = [a for a in args if a not in FLAGS]
    request, _, shell = given[0].partition("=") if len(given) == 1 else ("", "", "")
    if request not in REQUESTS or shell not in SHELLS:
        return fail(
            f"-sc {' '.join(given)}: expected one of {', '.join(r + '=SHELL' for r in REQUESTS)}"
            f" (SHELL: {', '.join(SHELLS)}), e.g. border train -sc install=bash"
        )
    if request != "query":
        _hydra(given[0])
        if request == "uninstall" and shell != "fish" and not os.environ.get("_HYDRA_OLD_COMP"):
            # Hydra's script restores the rule it replaced, and leaves its own when there was none
            print("complete -r border 2> /dev/null")
        return 0
    line = os.environ.get("COMP_LINE")
    if line is None:
        return fail(f"-sc query={shell}: COMP_LINE is not set (the completion script sets it)")
    line = _to_cursor(line, os.environ.get("COMP_POINT", ""))
    words = line.split()
    if len(words) < 2 or (len(words) == 2 and not line.endswith(" ")):  # the subcommand itself
        typed = words[1] if len(words) == 2 else ""
        _print([c for c in commands if c.startswith(typed)], shell)
    elif words[1] != "train":  # paths: the shell's own file-name completion
        if shell == "fish":
            _print(_paths("" if line.endswith(" ") else words[-1]), shell)
    else:
        without_train = re.sub(r"^(\s*\S+)\s+train(\s|$)", r"\1\2", line, count=1)
        os.environ["COMP_LINE"] = without_train  # what Hydra's plugin reads
        # a line Hydra cannot parse yet (``--cf``, ``agent.lr=[1,``) completes to nothing,
        # quietly: the shell prints stderr into the line being typed
        try:
            with suppress(Exception, SystemExit), redirect_stderr(io.StringIO()):
                _hydra(given[0])
        finally:
            os.environ["COMP_LINE"] = line
    return 0


def _to_cursor(line: str, point: str) -> str:
    """The part of the line before the cursor (bash's ``COMP_POINT``; fish sends only that)."""
    return line[: int(point)] if point.isdigit() and int(point) <= len(line) else line


def _paths(word: str) -> list[str]:
    """The paths that complete ``word`` (a dir with a trailing ``/``)."""
    parent, prefix = os.path.split(word)
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return []
    paths = [os.path.join(parent, n) for n in names if n.startswith(prefix)]
    return [p + "/" if os.path.isdir(p) else p for p in paths]


def _print(words: list[str], shell: str) -> None:
    """Completions as the shell's script reads them: one a line for fish, else a space apart."""
    print(("\n" if shell == "fish" else " ").join(sorted(words)))


def _hydra(request: str) -> None:
    """Hand ``request`` to Hydra's completion plugins over ``border train``'s configs, as the
    program ``border`` (the name the install scripts register)."""
    argv0 = sys.argv[0]
    sys.argv[0] = "border"
    hide_from_listings()  # trainer=<TAB> completes options, not the bases they compose
    try:
        with initialize_config_dir(
            version_base="1.3", config_dir=str(config_dir()), job_name="train"
        ):
            hydra = GlobalHydra.instance().hydra
            assert hydra is not None  # initialize_config_dir has just made it
            hydra.shell_completion(config_name="train", overrides=[request])
    finally:
        sys.argv[0] = argv0
