"""The forkserver's last preload: every object loaded before it goes to the collector's permanent
generation (``gc.freeze``).

The forkserver imports ``FORKSERVER_PRELOAD`` (:mod:`border_py.processes.children`) in order and offers no
other hook. When the learner exits, the server exits too, and an interpreter's exit runs full
collections over every object left, torch's included (a noticeable part of the end of a run:
``benchmarks/start_stop.py``, docs/04-scaling/performance.md), during which the server still holds
the run's stdout and stderr (a pipe reading ``border train`` waits for it).
Frozen objects are skipped; the children the server forks inherit them frozen.
"""

import gc

__all__: list[str] = []

gc.freeze()
