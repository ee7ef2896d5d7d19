"""``my_pkg``'s callbacks, as docs/05-customization/callbacks.md writes them."""

from __future__ import annotations

import logging
from pathlib import Path

from border_py.callbacks import Callback

log = logging.getLogger(__name__)


class Patience(Callback):
    """Stop the run once ``evaluations`` evaluations in a row bring no new best return."""

    def __init__(self, evaluations: int = 5) -> None:
        self.evaluations = evaluations
        self.best = float("-inf")
        self.since_best = 0

    def on_eval(self, opt_steps: int, env_steps: int, return_mean: float) -> bool:
        if return_mean > self.best:
            self.best, self.since_best = return_mean, 0
        else:
            self.since_best += 1
        return self.since_best >= self.evaluations  # True: stop gracefully


class LogSaves(Callback):
    """Log each checkpoint the run writes (into its train.log too: callbacks run in the learner)."""

    def on_save(self, checkpoint: Path, opt_steps: int, env_steps: int) -> None:
        log.info("my_pkg: %s holds the weights of opt step %d", checkpoint, opt_steps)
