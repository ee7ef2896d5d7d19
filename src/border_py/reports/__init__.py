"""What ``border report`` shows: runs found and read (:mod:`.collect`), grouped by seed and
aggregated (:mod:`.aggregate`, with the intervals of :mod:`.intervals`) and across tasks
(:mod:`.tasks`, normalised by :mod:`.references`), named by what differs between them
(:mod:`.labels`), as tables and CSV (:mod:`.tables`), as one figure (:mod:`.plots`, its bands
clipped to the returns a task can reach: :mod:`.bounds`) and as arrays for rliable (:mod:`.export`);
:func:`border_py.reports.report.report` puts them together.

Runs are found under the given directory (a run dir, a sweep dir, or ``outputs/`` as a whole):
directories with a ``result.json``, ``tensorboard/`` or ``checkpoints/``. Curves and counters are
read from the TensorBoard event files with TensorBoard's own reader; status, errors and wall time
from ``result.json`` (a run without one is still running, or was killed).

Runs of one env id whose overrides differ only in ``seed`` form a group. When some group has
several seeds, the report compares groups: per group the mean ``eval/return_mean`` with its 95%
interval and the IQM (see :mod:`border_py.reports.intervals`), against env steps, opt steps or
wall time; the table shows the same aggregates of the final and best returns, with the IQM's
interval. Otherwise (or with ``--runs``) it shows one line and one curve per run. Runs of several
env ids add a table of each configuration's normalised score across tasks.
"""

__all__: list[str] = []
