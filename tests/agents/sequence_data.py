"""Sequences for the recurrent agent's tests: random windows with chosen burn-in and episode ends,
and the same windows with garbage in every padded entry."""

from __future__ import annotations

import dataclasses

import numpy as np

from border_py.sequences import Sequences


def random_sequences(
    rows: list[tuple[int, int | None]],
    burn_in: int = 3,
    length: int = 4,
    tail: int = 2,
    obs_dim: int = 3,
    n_actions: int = 3,
    state_shape: tuple[int, int] = (2, 8),
    gamma: float = 0.9,
    seed: int = 0,
) -> Sequences:
    """One window per ``(burn, final)``: ``burn`` real burn-in steps at ``[B - burn, B)``;
    ``final`` the index of the episode's final observation (None: the episode goes on past the
    window), after which nothing is present. A window with ``burn < B`` starts its episode (zero
    state, no previous action); a full burn-in comes from mid-episode (a random stored state and
    previous action). Returns follow ``ret``/``discount``/``offset``'s definitions from random
    rewards; an episode that ends in the window terminates on even rows, is truncated on odd ones.
    """
    rng = np.random.default_rng(seed)
    steps = burn_in + length + tail
    t = np.arange(steps)
    columns: dict[str, list] = {k: [] for k in Sequences.__dataclass_fields__}
    for row, (burn, final) in enumerate(rows):
        first = burn_in - burn
        last = steps - 1 if final is None else final
        present = (t >= first) & (t <= last)
        acted = present & ((t < last) if final is not None else True)
        reward = np.where(acted, rng.normal(size=steps), 0.0).astype(np.float32)
        ret, discount, offset = [], [], []
        for i in range(burn_in, burn_in + length):
            m = min(tail, last - i) if final is not None else tail
            m = max(m, 1)
            ret.append(sum(gamma**k * reward[i + k] for k in range(m) if acted[i + k]))
            ends = final is not None and i + m == final
            discount.append(0.0 if ends and row % 2 == 0 else gamma**m)
            offset.append(m)
        start = burn < burn_in
        columns["obs"].append(np.where(present[:, None], rng.normal(size=(steps, obs_dim)), 0.0))
        columns["action"].append(np.where(acted, rng.integers(n_actions, size=steps), 0))
        columns["reward"].append(reward)
        columns["present"].append(present)
        columns["state"].append(
            np.zeros(state_shape) if start else rng.normal(size=state_shape) * 0.5
        )
        columns["burn"].append(burn)
        columns["first_prev_action"].append(-1 if start else int(rng.integers(n_actions)))
        columns["first_prev_reward"].append(0.0 if start else float(rng.normal()))
        columns["ret"].append(ret)
        columns["discount"].append(discount)
        columns["offset"].append(offset)
        columns["mask"].append(acted[burn_in : burn_in + length])
    dtypes = {"obs": np.float32, "action": np.int64, "reward": np.float32, "present": bool}
    dtypes |= {"state": np.float32, "burn": np.int64, "first_prev_action": np.int64}
    dtypes |= {"first_prev_reward": np.float32, "ret": np.float32, "discount": np.float32}
    dtypes |= {"offset": np.int64, "mask": bool}
    arrays = {k: np.asarray(columns[k], dtype=dtypes[k]) for k in dtypes}
    return Sequences(**arrays, burn_in=burn_in)


def with_garbage(seq: Sequences, seed: int = 1) -> Sequences:
    """``seq`` (its sample metadata kept) with its padded entries overwritten: NaN observations and rewards where nothing is
    present; huge or negative actions there and at masked-out learning steps; NaN returns and
    discounts and huge offsets at masked-out learning steps."""
    rng = np.random.default_rng(seed)
    arrays = {k: v.copy() for k, v in seq.arrays().items()}
    absent = ~seq.present
    arrays["obs"][absent] = np.nan
    arrays["reward"][absent] = np.nan
    no_action = absent.copy()
    no_action[:, seq.burn_in : seq.burn_in + seq.length] |= ~seq.mask
    noise = rng.choice([10**6, -7, 99], size=seq.action.shape)
    arrays["action"] = np.where(no_action, noise, seq.action)
    off = ~seq.mask
    arrays["ret"][off] = np.nan
    arrays["discount"][off] = np.nan
    arrays["offset"][off] = 10**6
    return dataclasses.replace(seq, **arrays)
