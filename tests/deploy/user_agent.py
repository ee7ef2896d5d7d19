"""A user's own agent class, as a saved config names it (``agent._target_``): DQN under
another name."""

from __future__ import annotations

from border_py.agents.dqn import DQN


class MyDQN(DQN):
    """DQN, as a user's package would subclass it."""
