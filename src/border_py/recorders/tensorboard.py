"""TensorBoard recording through ``torch.utils.tensorboard`` (the default recorder)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2, summary_v2
from torch.utils.tensorboard import SummaryWriter

from border_py.config import positive
from border_py.files import make_dir
from border_py.layout import TENSORBOARD
from border_py.recorders.base import hyperparameters
from border_py.secrets import redact

__all__ = ["TensorBoardRecorder"]

log = logging.getLogger(__name__)

MAX_WAIT = 2.0  # seconds a new event file waits for its name to sort last (a second, with margin)

STATUS = {
    "completed": "STATUS_SUCCESS",
    "interrupted": "STATUS_UNKNOWN",  # stopped by a signal: neither success nor failure
    "failed": "STATUS_FAILURE",
}


class TensorBoardRecorder:
    """Scalars (global step = optimization step), the config as text, and the HPARAMS summary,
    in ``<run dir>/tensorboard/``.

    Every config value is a hyper-parameter of the run in TensorBoard's HPARAMS tab, where the jobs
    of a sweep (``tensorboard --logdir <sweep dir>``) are compared on ``eval/return_mean`` and the
    final ``hparams/*`` metrics. Each run writes its session start and end; the experiment (the
    hyper-parameters' domains across runs, the metrics) is left to TensorBoard to infer from the
    runs it finds, since a per-run experiment summary would describe only one run of a sweep.

    Args:
        flush_secs: seconds between flushes of pending events to disk.
    """

    def __init__(self, flush_secs: int = 10) -> None:
        positive("flush_secs", flush_secs, int)
        self.flush_secs = flush_secs
        self.writer: SummaryWriter | None = None

    def open(self, run_dir: Path, config: dict[str, Any], resume_step: int | None) -> None:
        """Create the writer; a new run also writes its config and hyper-parameters."""
        self.log_dir = make_dir(Path(run_dir) / TENSORBOARD)  # never a symlink
        _after_existing_files(self.log_dir)
        purge = None if resume_step is None else resume_step + 1
        self.writer = SummaryWriter(str(self.log_dir), purge_step=purge, flush_secs=self.flush_secs)
        self.last_step = resume_step or 0
        if resume_step is None:
            text = json.dumps(redact(config), indent=2, default=str)
            self.writer.add_text("config", "```\n" + text + "\n```", 0)
            self._summary(summary_v2.hparams_pb(hyperparameters(config)))

    def _summary(self, summary: Summary, step: int | None = None) -> None:
        assert self.writer is not None and self.writer.file_writer is not None, "not open"
        self.writer.file_writer.add_summary(summary, step)

    def scalars(self, values: dict[str, Any], step: int) -> None:
        """Write each ``tag: value`` at ``step``, all in one event (TensorBoard reads each value of
        an event as its tag's point): a tenth of the learner's time of one ``add_scalar`` call
        per tag, whose events the writer's thread serializes one by one under the GIL."""
        self.last_step = max(self.last_step, step)
        if not values:
            return
        points = [Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()]
        self._summary(Summary(value=points), step)

    def close(self, status: str = "completed", final: dict[str, float] | None = None) -> None:
        """Write the final metrics and the session's end status, flush, close (idempotent)."""
        if self.writer is None:
            return
        if final:
            self.scalars(final, self.last_step)
        self._summary(_session_end(STATUS[status]))
        self.writer.close()
        self.writer = None


def _session_end(status: str) -> Summary:
    """The HPARAMS plugin's session-end summary with ``status`` (e.g. ``STATUS_FAILURE``).

    TensorBoard's ``hparams.summary.session_end_pb`` makes the same summary but imports
    TensorFlow; this uses the plugin's own metadata helper and tensor, as its ``summary_v2`` does.
    """
    info = plugin_data_pb2.SessionEndInfo(
        status=api_pb2.Status.Value(status), end_time_secs=time.time()
    )
    data = plugin_data_pb2.HParamsPluginData(session_end_info=info)
    value = Summary.Value(
        tag=metadata.SESSION_END_INFO_TAG,
        metadata=metadata.create_summary_metadata(data),
        tensor=metadata.NULL_TENSOR,
    )
    return Summary(value=[value])


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
    wait = max(stamps) + 1 - time.time() if stamps else 0.0
    if wait > MAX_WAIT:  # a clock set back, or a crafted name: never wait on a file's word
        log.warning(
            "%s: an event file is named %.0f s in the future; TensorBoard may read this"
            " session's events before it",
            log_dir,
            wait,
        )
    elif wait > 0:
        time.sleep(wait)
