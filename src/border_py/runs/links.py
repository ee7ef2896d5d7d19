"""A run dir holds its own files and dirs: a symlink in it is refused, never followed.

A link planted in a run (``train.log`` to a file elsewhere, ``checkpoints/best`` to another run's
checkpoint, ``.hydra/hydra.yaml`` to a key file that MLflow would upload, ``attempts/`` or
``wandb/`` to a dir outside) would have border write, move or read files that are not the run's;
a FIFO or a device would have it block on a read. :func:`refuse_links` is called wherever a run
dir is opened: a fresh run's claim, ``resume=`` and ``resume=auto`` (before Hydra opens the run's
log or writes ``.hydra/``: for a sweep's jobs too), ``border eval``, and each run ``border report``
reads.

W&B's dir ``wandb/`` is checked like every other, but for the log links W&B itself makes there
(:func:`wandb_link`): border never reads anything under ``wandb/`` (W&B alone does), and a link of
any other name, or at any other place, is refused.
"""

from __future__ import annotations

from pathlib import Path

from border_py.files import refuse_links_in
from border_py.layout import WANDB

__all__ = ["refuse_links"]

# W&B's links in its dir: to the latest run and its logs (at the top), and each run's link to the
# W&B core's log in the user's cache (<run>/logs/debug-core.log)
WANDB_TOP_LINKS = ("latest-run", "debug.log", "debug-internal.log")
WANDB_RUN_LINK = ("logs", "debug-core.log")


def wandb_link(parts: tuple[str, ...]) -> bool:
    """Whether a link at ``wandb/<parts...>`` is one W&B makes itself."""
    top = len(parts) == 1 and parts[0] in WANDB_TOP_LINKS
    return top or (len(parts) == 3 and parts[1:] == WANDB_RUN_LINK)


def refuse_links(run_dir: Path, own: bool = True) -> None:
    """Refuse a symlink, or anything but a regular file or a dir, anywhere in ``run_dir`` (but
    W&B's own log links in ``wandb/``, see :func:`wandb_link`). A checkpoint dir
    (``<run>/checkpoints/<name>``) is checked the same way.

    Args:
        run_dir: the dir.
        own: look at every level below (False: ``run_dir``'s own entries only, e.g. a sweep
            dir's, whose job dirs are runs of their own; a job dir that is a link is refused).

    Raises:
        ConfigError: one line naming the entry (a link's target is left as it is).
    """
    wandb_dir = Path(run_dir) / WANDB

    def made_by_wandb(path: Path) -> bool:
        return path.is_relative_to(wandb_dir) and wandb_link(path.relative_to(wandb_dir).parts)

    refuse_links_in(run_dir, made_by_wandb, own)
