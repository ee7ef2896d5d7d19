"""The Hugging Face Hub end of ``border push`` and ``border pull``, through ``huggingface_hub``
(the ``hub`` extra).

The token is ``huggingface_hub``'s own (``hf auth login``, or ``HF_TOKEN``): border never reads,
writes or prints it. The calls that reach the Hub take the API object or the download function
as an argument (:func:`upload`, :func:`pull`), so that a test can hand in a recording API or a
local copy: these machines cannot reach the Hub.
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from border_py.errors import ConfigError, RunError, first_line, printable
from border_py.files import NotRegular, make_dir, read_json, refuse_links_in
from border_py.hub.card import CardFacts
from border_py.hub.contents import CARD, CHECKPOINT, check_not_a_module, keep, left_out_line
from border_py.hub.folder import PushSettings, build, publish
from border_py.layout import CONFIG
from border_py.runs.compat import current_targets
from border_py.runs.timeline import holds_policy
from border_py.runs.trust import Trust

__all__ = ["pull", "push"]

log = logging.getLogger(__name__)

# owner/name: letters, digits, '-', '_', '.', not starting or ending with '-' or '.' (the Hub's rule)
_PART = r"[A-Za-z0-9](?:[\w.-]{0,94}[A-Za-z0-9_])?"
REPO_ID = re.compile(rf"^{_PART}/{_PART}$")
EXTRA = "pip install 'border-py[hub]'"

Fetch = Callable[[str, "str | None", Path], object]  # (repo id, revision, local dir): a download
DOWNLOAD = ".download"  # where a pull downloads, inside its hidden dir: removed once sorted


def check_repo_id(repo_id: str, key: str = "--repo") -> str:
    """``repo_id`` if it is a Hub repo id (``owner/name``; ``key``: what the command calls it).

    Raises:
        ConfigError: one line saying what a repo id is.
    """
    if not REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id:
        raise ConfigError(
            f"{key} {repo_id}: not a Hub repo id; <owner>/<name> of letters, digits, '-', '_'"
            " and '.' (e.g. your-name/cartpole-dqn)"
        )
    return repo_id


def hub_api() -> Any:
    """``huggingface_hub.HfApi()`` (its own token: the login's, or ``HF_TOKEN``).

    Raises:
        ConfigError: ``huggingface_hub`` is not installed (one line naming the extra).
    """
    try:
        from huggingface_hub import HfApi
    except ImportError as exc:
        raise ConfigError(f"border push needs huggingface_hub ({exc}): {EXTRA}") from None
    return HfApi()


def upload(api: Any, repo_id: str, folder: Path, message: str) -> str:
    """Create the model repo ``repo_id`` if needed and upload ``folder``'s files as one commit;
    return the commit's URL (or the repo's, where the API says none).

    Raises:
        RunError: the Hub refused or could not be reached (one line; the token is never in it).
    """
    try:
        api.create_repo(repo_id=repo_id, repo_type="model", exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id, repo_type="model", folder_path=str(folder), commit_message=message
        )
    except Exception as exc:  # huggingface_hub's HTTP errors, or no network at all
        raise RunError(f"push to {repo_id} failed: {first_line(exc)}") from None
    return str(getattr(commit, "commit_url", None) or f"https://huggingface.co/{repo_id}")


def snapshot(repo_id: str, revision: str | None, local_dir: Path) -> object:
    """Download the model repo ``repo_id`` at ``revision`` into ``local_dir`` (huggingface_hub's
    ``snapshot_download``).

    Raises:
        ConfigError: ``huggingface_hub`` is not installed (one line naming the extra).
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise ConfigError(f"border pull needs huggingface_hub ({exc}): {EXTRA}") from None
    return snapshot_download(repo_id, revision=revision, local_dir=local_dir)


def _fetch_into(fetch: Fetch, repo_id: str, revision: str | None) -> Callable[[Path], list[str]]:
    def fill(folder: Path) -> list[str]:
        download = make_dir(folder / DOWNLOAD)
        try:
            fetch(repo_id, revision, download)
        except ConfigError:
            raise
        except Exception as exc:  # huggingface_hub's HTTP errors, or no network at all
            at = f" at {revision}" if revision else ""
            raise RunError(f"pull of {repo_id}{at} failed: {first_line(exc)}") from None
        try:
            refuse_links_in(download)  # no link is W&B's there
        except NotRegular as exc:
            what = "a symbolic link" if exc.link else "neither a file nor a dir"
            raise ConfigError(
                f"{repo_id}: {printable(exc.path.relative_to(download).as_posix())} in the"
                f" download is {what}; a pull refuses a download holding one (nothing was kept)"
            ) from None
        left_out = keep(download, folder)
        shutil.rmtree(download)
        if not (folder / CARD).is_file() or not holds_policy(folder / CHECKPOINT):
            raise ConfigError(
                f"{repo_id}: not a policy border push shared (no {CARD} and {CHECKPOINT}/ with"
                " its weights, config and meta); nothing was kept"
            )
        return left_out

    return fill


def pull(repo_id: str, out: Path, revision: str | None = None, fetch: Fetch = snapshot) -> Path:
    """Download the policy ``border push`` shared as ``repo_id`` into ``out`` (a new or empty
    dir, not named as a module Python can import; published whole, see
    :func:`~border_py.hub.folder.publish`); return its checkpoint dir.

    The download is data, and only what ``border push`` writes is kept (see
    :mod:`border_py.hub.contents`): no file of it is imported by ``load_policy``, nor by Python
    started in ``out`` or beside it; what was left out is said in one line (a warning). The
    export's ``policy.py``, kept only as this border-py writes it, runs when the export is used
    (an export is code). A config that names code beyond border-py's and gymnasium's is said (a
    warning): loading it takes ``trust=[...]``.

    Raises:
        ConfigError: a bad repo id or ``out``; a repo that is not a pushed policy.
        RunError: the download failed.
    """
    check_repo_id(repo_id, "border pull")
    check_not_a_module(out, "-o")
    left_out = publish(_fetch_into(fetch, repo_id, revision), out, "-o")
    dest = out.expanduser().absolute()
    if left_out:
        log.warning("%s", left_out_line(dest, left_out))
    checkpoint = dest / CHECKPOINT
    try:
        Trust().check_imports(current_targets(read_json(checkpoint / CONFIG)), checkpoint / CONFIG)
    except (OSError, ValueError) as exc:  # ConfigError included: a line, not a refusal here
        log.warning("%s", printable(first_line(exc)))
    return checkpoint


def commit_message(facts: CardFacts) -> str:
    """The upload's commit message: what is pushed and its fresh score."""
    return (
        f"border push: {facts.algorithm} on {facts.env_id}, mean return {facts.score.text()}"
        f" over {facts.score.episodes} fresh episodes"
    )


def push(
    run: str | Path, settings: PushSettings, dry_run: Path | None = None, api: Any = None
) -> tuple[CardFacts, str]:
    """Share ``run``'s policy: build the folder (see :mod:`border_py.hub.folder`) and upload it
    to ``settings.repo_id`` with ``api`` (default: :func:`hub_api`), or, with ``dry_run``, write
    it there and upload nothing. Return what the card says and where it went (the commit's URL,
    or the dry-run dir).

    Raises:
        ConfigError: bad input, said before anything is evaluated where it can be.
        RunError: the upload failed.
    """
    check_repo_id(settings.repo_id)
    if dry_run is not None:
        facts = publish(lambda folder: build(run, folder, settings), dry_run, "--dry-run")
        return facts, str(dry_run.expanduser().absolute())
    api = hub_api() if api is None else api  # a missing extra fails before the evaluation
    with tempfile.TemporaryDirectory(prefix="border-push-") as staging:
        facts = build(run, Path(staging), settings)
        return facts, upload(api, settings.repo_id, Path(staging), commit_message(facts))
