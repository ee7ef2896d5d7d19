"""A run's files: checkpoints, results, run dirs and resuming."""

__all__: list[str] = []
