"""A run dir holds its own files and dirs: a symlink in it is refused, never followed.

A link planted in a run (``train.log`` to a file elsewhere, ``checkpoints/best`` to another run's
checkpoint, ``.hydra/hydra.yaml`` to a key file that MLflow would upload, ``attempts/`` to a dir
outside) would have border write, move or read files that are not the run's; a FIFO or a device
would have it block on a read. :func:`refuse_links` is called wherever a run dir is opened: a
fresh run's claim, ``resume=`` and ``resume=auto`` (before Hydra opens the run's log or writes
``.hydra/``: for a sweep's jobs too), ``border eval``, and each run ``border report`` reads.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from border_py.errors import ConfigError
from border_py.files import link_refusal
from border_py.layout import WANDB

OTHERS = (WANDB,)  # dirs other tools fill, with links of their own (W&B's latest-run)


def refuse_links(run_dir: Path, own: bool = True) -> None:
    """Refuse a symlink, or anything but a regular file or a dir, anywhere in ``run_dir`` (but
    in :data:`OTHERS`). A checkpoint dir (``<run>/checkpoints/<name>``) is checked the same way.

    Args:
        run_dir: the dir.
        own: look at every level below (False: ``run_dir``'s own entries only, e.g. a sweep
            dir's, whose job dirs are runs of their own).

    Raises:
        ConfigError: one line naming the entry (a link's target is left as it is).
    """
    for top, dirs, files in os.walk(run_dir):  # never descends into a linked dir
        if Path(top) == Path(run_dir):
            dirs[:] = [d for d in dirs if d not in OTHERS] if own else []
        for name in sorted(dirs + files):
            path = os.path.join(top, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise link_refusal(path)
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ConfigError(
                    f"{path}: neither a file nor a dir (a FIFO, socket or device); a run dir"
                    " holds only its own files"
                )
