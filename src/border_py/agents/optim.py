"""The agents' optimizers: Adam per parameter group, created on first use.

Actors and the evaluator only act, so they never need an optimizer (and creating the first one
imports ``torch._dynamo``: seconds of start-up per process). ``eps`` is Adam's epsilon
(``agent.adam_eps``): torch's default 1e-8. Dopamine's Atari configs use larger ones: 1.5e-4
with lr 6.25e-5 for Rainbow and for IQN matched to Rainbow; 3.125e-4 (0.01 / batch size 32) with
lr 5e-5 for IQN with the paper's settings, and with lr 2.5e-4 for C51.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch


class LazyAdam(Mapping[str, torch.optim.Optimizer]):
    """Named Adam optimizers, all created on the first access to any of them.

    Args:
        groups: name -> (parameters, learning rate).
        eps: Adam's epsilon, added to the root of the second moment estimate.
    """

    def __init__(
        self, groups: Mapping[str, tuple[Sequence[torch.Tensor], float]], eps: float
    ) -> None:
        self.groups = groups
        self.eps = eps
        self._built: dict[str, torch.optim.Optimizer] | None = None

    @property
    def built(self) -> bool:
        """Whether the optimizers exist yet."""
        return self._built is not None

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        if self._built is None:
            self._built = {
                name: torch.optim.Adam(params, lr=lr, eps=self.eps, fused=True)
                for name, (params, lr) in self.groups.items()
            }
        return self._built

    def __getitem__(self, name: str) -> torch.optim.Optimizer:
        return self._optimizers()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)

    def state_dict(self) -> dict[str, dict[str, Any]]:
        """Every optimizer's state, by name."""
        return {name: optimizer.state_dict() for name, optimizer in self._optimizers().items()}

    def load_state_dict(self, state: Mapping[str, dict[str, Any]]) -> None:
        """Restore :meth:`state_dict` (the same names).

        Raises:
            KeyError: the saved names differ from this agent's.
        """
        if set(state) != set(self.groups):
            raise KeyError(f"optimizers {sorted(state)}, the agent has {sorted(self.groups)}")
        for name, optimizer in self._optimizers().items():
            optimizer.load_state_dict(state[name])
