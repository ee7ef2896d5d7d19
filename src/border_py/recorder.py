"""TensorBoard recording through ``torch.utils.tensorboard``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter


class TensorBoardRecorder:
    """Writes scalars (global step = optimization step) and text into ``<run dir>/tensorboard/``.

    Args:
        run_dir: the run directory.
        purge_step: when continuing a run, the first step written now; events of earlier
            sessions at this step or later are discarded by TensorBoard's readers.
    """

    def __init__(self, run_dir: Path, purge_step: int | None = None) -> None:
        self.log_dir = Path(run_dir) / "tensorboard"
        _after_existing_files(self.log_dir)
        self.writer: SummaryWriter | None = SummaryWriter(str(self.log_dir), purge_step=purge_step)

    def scalars(self, values: dict[str, Any], step: int) -> None:
        """Write each ``tag: value`` at ``step`` (tensors are converted to floats)."""
        assert self.writer is not None, "recorder is closed"
        for tag, value in values.items():
            self.writer.add_scalar(tag, float(value), step)

    def config(self, config: dict[str, Any]) -> None:
        """Write the resolved config as a text summary (``config``)."""
        assert self.writer is not None, "recorder is closed"
        text = json.dumps(config, indent=2, default=str)
        self.writer.add_text("config", "```\n" + text + "\n```", 0)

    def flush(self) -> None:
        """Push pending events to disk."""
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _after_existing_files(log_dir: Path) -> None:
    """Wait, if needed, until a new event file's name sorts after every existing one.

    Readers take a run's event files in name order, and a name starts with its creation second
    (then host, pid and a per-process counter): a resumed run's file created in the same second as
    the previous session's could otherwise be read first.
    """
    stamps = []
    for path in log_dir.glob("events.out.tfevents.*"):
        stamp = path.name.split(".")[3]
        if stamp.isdigit():
            stamps.append(int(stamp))
    if stamps:
        time.sleep(max(0.0, max(stamps) + 1 - time.time()))
