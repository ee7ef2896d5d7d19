"""The agents' hyper-parameters, validated by one rule per name.

Every agent calls :func:`check_hparams` with its values; a key means the same (and is checked the
same way) in every agent, and a bad value is one :class:`~border_py.errors.ConfigError` line naming
it (``build`` prefixes the group: ``agent.lr=-1: must be a positive float``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from border_py.config import flag, fraction, non_negative, positive, require, widths


def _null_or_positive(key: str, value: Any) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    require(key, value is None or (number and value > 0), "null or > 0", value)


def _null_or_number(key: str, value: Any) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    require(key, value is None or number, "null or a number", value)


def _loss(key: str, value: Any) -> None:
    require(key, value in ("huber", "mse"), "'huber' or 'mse'", value)


_positive_int = partial(positive, kind=int)

RULES: dict[str, Callable[[str, Any], None]] = {
    # optimization
    "lr": positive,
    "actor_lr": positive,
    "critic_lr": positive,
    "alpha_lr": positive,
    "adam_eps": positive,
    "batch_size": _positive_int,
    "max_grad_norm": _null_or_positive,
    # returns and targets
    "gamma": fraction,
    "n_step": _positive_int,
    "target_update_interval": _positive_int,
    "tau": partial(fraction, open_low=True),
    "double_dqn": flag,
    "loss": _loss,
    # networks
    "hidden_sizes": widths,
    "dueling": flag,
    "n_critics": _positive_int,
    # IQN
    "n_cos": _positive_int,
    "n_tau": _positive_int,
    "n_tau_prime": _positive_int,
    "k": _positive_int,
    "kappa": positive,
    # SAC's entropy and exploration
    "alpha": positive,
    "learn_alpha": flag,
    "target_entropy": _null_or_number,
    "random_steps": non_negative,
}


def check_hparams(**values: Any) -> None:
    """Check each ``name=value`` with the rule for ``name`` (a :class:`ConfigError` for a bad one)."""
    for key, value in values.items():
        RULES[key](key, value)
