"""A test wrapper that appends the seed of every reset to a file: what an env was really reset
with (an ``evaluation_only`` wrapper sees the evaluation episodes only)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class SeedLog(gym.Wrapper):
    """Appends each ``reset``'s seed, one a line, to ``path`` (written at once: the evaluator
    process may be killed at the run's end)."""

    def __init__(self, env: gym.Env, path: str) -> None:
        super().__init__(env)
        self.path = path

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        with open(self.path, "a") as log:
            log.write(f"{seed}\n")
        return self.env.reset(seed=seed, options=options)


def logged_seeds(path: Any) -> list[int]:
    """The seeds :class:`SeedLog` wrote, in order (unseeded resets left out)."""
    return [int(line) for line in open(path).read().split() if line != "None"]
