"""Hyper-parameter search with Optuna, trials in parallel, pruned early (``border tune``).

A search space is a YAML file, ``tune/<name>.yaml`` in a ``--config-dir`` (or a ``pkg://`` config
package) or in border-py's own configs, found through Hydra's search path like any config: the
Optuna sampler and pruner (``_target_`` specs), the ``border train`` overrides every trial shares,
and ``params``, each a ``Trial.suggest_<type>`` call (:mod:`.space` loads and checks it). The study
lives in SQLite (``<study dir>/study.db``), so a search can be continued, watched
(``optuna-dashboard``) or joined by another ``border tune`` on the same study dir.

Each trial is one process (``spawn``, :mod:`.trial`) running :func:`border_py.train` with its
sampled overrides, in ``<study dir>/trials/<number>/``; up to ``n_jobs`` run at once
(:mod:`.tuner`). After each evaluation the trial reports the objective so far (``objective``: the
best, last or mean ``eval/return_mean``) at the opt step; when the pruner says so, the run stops
gracefully and the trial is marked PRUNED. ``<study dir>/best.yaml`` holds the best trial's value,
parameters and overrides.

Optuna is an optional dependency (``border-py[tune]``): it is imported inside the functions that
use it, so that importing this package never needs it.
"""
