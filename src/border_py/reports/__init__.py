"""What ``border report`` shows: runs found and read (:mod:`.collect`), grouped by seed and
aggregated (:mod:`.aggregate`), as tables and CSV (:mod:`.tables`) and as one plot
(:mod:`.plots`); :func:`border_py.reports.report.report` puts them together.

Runs are found under the given directory (a run dir, a sweep dir, or ``outputs/`` as a whole):
directories with a ``result.json``, ``tensorboard/`` or ``checkpoints/``. Curves and counters are
read from the TensorBoard event files with TensorBoard's own reader; status, errors and wall time
from ``result.json`` (a run without one is still running, or was killed).

Runs whose overrides differ only in ``seed`` form a group. When some group has several seeds,
the report compares groups: per group the mean ``eval/return_mean`` with its 95% bootstrap
confidence band and the IQM (see :mod:`border_py.reports.aggregate`), against env steps, opt steps
or wall time; the table shows the same aggregates of the final and best returns. Otherwise (or
with ``--runs``) it shows one line and one curve per run.
"""
