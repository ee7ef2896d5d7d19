"""The C++ Atari vector envs behind one small protocol: envpool's (``env.backend=envpool``) and
ale-py's ``AtariVectorEnv`` (``env.backend=ale_vector``), both built without reward clipping,
life-loss episodes or time limits (:class:`~border_py.envs.batched.BatchedAtari` applies ours).

Both autoreset on the step *after* an episode's end (gymnasium's ``NEXT_STEP`` mode: that step
ignores its action and returns the next episode's first observation). The adapter never lets that
happen: it resets each ended env explicitly right after the step that ended it, so the pool's own
autoreset never triggers and no step across an episode boundary exists.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

import numpy as np

__all__ = ["AleVectorPool", "AtariPool", "EnvpoolPool"]

Step = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # obs, reward, terminated, truncated


class AtariPool(Protocol):
    """A C++ vector env of ``num_envs`` preprocessed Atari envs (stacks of grayscale frames)."""

    num_envs: int
    fires: bool  # whether it presses FIRE after a reset itself

    def reset(self, ids: np.ndarray) -> np.ndarray:
        """Reset envs ``ids`` (ascending); their first observations."""
        ...

    def step(self, actions: np.ndarray, ids: np.ndarray | None = None) -> Step:
        """Step envs ``ids`` (ascending; None: all) with ``actions``."""
        ...

    def close(self) -> None:
        """Release the envs."""
        ...


def _by_env(result: tuple[Any, ...], env_id: np.ndarray) -> list[np.ndarray]:
    """``result``'s arrays in ascending env order."""
    order = np.argsort(env_id, kind="stable")
    return [np.asarray(a)[order] for a in result]


class EnvpoolPool:
    """envpool's Atari (threads, ROMs bundled), in sync mode; FIRE is the adapter's to press.

    Args:
        game: the ALE id's game (``Pong`` for ``ALE/Pong-v5``).
        num_envs: envs.
        seed: envpool's seed (env ``i`` draws from its own stream).
        options: envpool's preprocessing keys (frame_skip, noop_max, stack_num, ...).
    """

    fires = False

    def __init__(self, game: str, num_envs: int, seed: int, options: dict[str, Any]) -> None:
        envpool = importlib.import_module("envpool")
        self.num_envs = num_envs
        self.env = envpool.make_gymnasium(
            f"{game}-v5",
            num_envs=num_envs,
            seed=seed,
            reward_clip=False,
            episodic_life=False,
            use_fire_reset=False,
            gray_scale=True,
            use_inter_area_resize=True,
            **options,
        )

    def reset(self, ids: np.ndarray) -> np.ndarray:
        """Reset envs ``ids``; their first observations."""
        obs, info = self.env.reset(ids.astype(np.int32))
        return _by_env((obs,), info["env_id"])[0]

    def step(self, actions: np.ndarray, ids: np.ndarray | None = None) -> Step:
        """Step envs ``ids`` (None: all) with ``actions``."""
        env_id = None if ids is None else ids.astype(np.int32)
        obs, reward, terminated, truncated, info = self.env.step(actions, env_id)
        out = _by_env((obs, reward, terminated, truncated), info["env_id"])
        return out[0], out[1], out[2], out[3]

    def close(self) -> None:
        """Release the envs."""
        self.env.close()


class AleVectorPool:
    """ale-py's ``AtariVectorEnv``; it presses FIRE within its resets itself (``use_fire_reset``:
    it cannot step a subset of its envs).

    Args:
        game: the ROM's snake_case name (``pong``, ``ms_pacman``).
        num_envs: envs.
        seed: env ``i``'s first reset is seeded with ``seed + i``.
        options: ale-py's preprocessing keys (frameskip, noop_max, stack_num, ...).
    """

    fires = True

    def __init__(self, game: str, num_envs: int, seed: int, options: dict[str, Any]) -> None:
        vector_env = importlib.import_module("ale_py.vector_env")
        self.num_envs = num_envs
        self.seed = seed
        self.env = vector_env.AtariVectorEnv(
            game,
            num_envs,
            autoreset_mode="NextStep",
            reward_clipping=False,
            episodic_life=False,
            grayscale=True,
            maxpool=True,
            **options,
        )
        self._started = False

    def reset(self, ids: np.ndarray) -> np.ndarray:
        """Reset envs ``ids`` (the first call: all of them, seeded); their first observations."""
        if not self._started:
            self._started = True
            obs, info = self.env.reset(seed=self.seed)
        else:
            mask = np.zeros(self.num_envs, dtype=bool)
            mask[ids] = True
            obs, info = self.env.reset(options={"reset_mask": mask})
        return _by_env((obs,), info["env_id"])[0][ids]

    def step(self, actions: np.ndarray, ids: np.ndarray | None = None) -> Step:
        """Step every env with ``actions`` (``ids`` must be None: no subsets)."""
        assert ids is None, "ale-py's vector env steps all its envs at once"
        obs, reward, terminated, truncated, info = self.env.step(actions.astype(np.int64))
        out = _by_env((obs, reward, terminated, truncated), info["env_id"])
        return out[0], out[1], out[2], out[3]

    def close(self) -> None:
        """Release the envs."""
        self.env.close()
