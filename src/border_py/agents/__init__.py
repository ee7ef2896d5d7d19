"""Agents: the learning algorithms. See :class:`border_py.agents.base.Agent` for the protocol."""
