"""Where everything of a run lives: the names of a run dir's entries and of a checkpoint's files,
spelled out here once (every other module takes them from here).

```
<run dir>/
  .border_run        the run's claim (who started it, with which overrides)
  .border_lock       held (flock) by the session that trains it
  .hydra/            Hydra's composed config and overrides (config.yaml, hydra.yaml, overrides.yaml)
  train.log          the log
  result.json        how the last session ended
  evaluations.npz    every selection evaluation's episodes (RL Zoo's layout)
  tensorboard/       TensorBoard event files
  checkpoints/       <opt steps, 9 digits>/, best/, abandoned/ (an older timeline's)
  attempts/<n>/      what an attempt killed before its first checkpoint left
  mlflow_run.json, mlflow.db, mlartifacts/   the MLflow recorder's (mlflow-<n>.db: a store
                     border started beside one that was not its own)
  wandb/, wandb_run.json                      the W&B recorder's
```
"""

from __future__ import annotations

__all__ = [
    "ABANDONED",
    "AGENT",
    "ATTEMPTS",
    "BEST",
    "BUFFER",
    "BUFFER_FILE_SUFFIX",
    "BUFFER_INDEX",
    "BUFFER_NPZ",
    "CHECKPOINTS",
    "CLAIM",
    "CONFIG",
    "EVALUATIONS",
    "HYDRA",
    "HYDRA_CONFIG",
    "HYDRA_OVERRIDES",
    "HYDRA_RECORDS",
    "LOCK",
    "LOG",
    "META",
    "MLFLOW_ARTIFACTS",
    "MLFLOW_RUN",
    "MLFLOW_STORE",
    "MULTIRUN",
    "POLICY",
    "RESULT",
    "TENSORBOARD",
    "TRAINER",
    "WANDB",
    "WANDB_RUN",
]

CLAIM = ".border_run"
LOCK = ".border_lock"
HYDRA = ".hydra"
HYDRA_RECORDS = ("config.yaml", "hydra.yaml", "overrides.yaml")  # what Hydra writes in .hydra/
HYDRA_OVERRIDES = "overrides.yaml"
HYDRA_CONFIG = "config.yaml"  # the composed config Hydra saved (border report reads env and agent)
MULTIRUN = "multirun.yaml"  # in a sweep dir
LOG = "train.log"
RESULT = "result.json"
EVALUATIONS = "evaluations.npz"  # the selection evaluations (border_py.evaluation.history)
TENSORBOARD = "tensorboard"
CHECKPOINTS = "checkpoints"
BEST = "best"
ABANDONED = "abandoned"
ATTEMPTS = "attempts"
MLFLOW_RUN = "mlflow_run.json"
MLFLOW_STORE = "mlflow.db"
MLFLOW_ARTIFACTS = "mlartifacts"  # the artifacts of the MLflow runs of the store beside it
WANDB = "wandb"
WANDB_RUN = "wandb_run.json"

# a checkpoint dir's files
POLICY = "policy.pt"
AGENT = "agent.pt"
TRAINER = "trainer.pt"
CONFIG = "config.json"
META = "meta.json"
BUFFER = "replay_buffer"  # a dir: one .npy file per array (memory-mappable) and BUFFER_INDEX
BUFFER_INDEX = "arrays.json"  # in BUFFER: its arrays' names, dtypes and shapes
BUFFER_FILE_SUFFIX = ".npy"  # in BUFFER: <array name>.npy
BUFFER_NPZ = "replay_buffer.npz"  # the buffer as checkpoints before the BUFFER dir held it (read)
