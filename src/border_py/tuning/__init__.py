"""Hyper-parameter search with Optuna, trials in parallel, pruned early (``border tune``).

A search space is a YAML file, ``tune/<name>.yaml`` in a ``--config-dir`` (or a ``pkg://`` config
package) or in border-py's own configs, found through Hydra's search path like any config: the
Optuna sampler and pruner (``_target_`` specs), the ``border train`` overrides every trial shares,
and ``params``, each a ``Trial.suggest_<type>`` call (:mod:`.space` loads and checks it). The study
lives in a journal file (``<study dir>/journal.log``) or the storage given (:mod:`.storage`), so a
search can be continued, watched (``optuna-dashboard``) or joined by another ``border tune`` on
the same storage.

Each trial is created by the driver (:mod:`.tuner`) and run by one process (``spawn``,
:mod:`.trial`): :func:`border_py.train` with its sampled overrides, in
``<study dir>/trials/<number>/``; up to ``n_jobs`` run at once. After each evaluation the trial
reports the objective so far (``objective``: the best, last or mean ``eval/return_mean``) at the
opt step; when the pruner says so, the run stops gracefully and the trial is marked PRUNED. ``<study dir>/best.yaml`` holds the best trial's value,
parameters and the ``border train`` command that reproduces its config (:mod:`.best`).

Optuna is an optional dependency (``border-py[tune]``): it is imported inside the functions that
use it, so that importing this package never needs it.
"""

__all__: list[str] = []
