"""Environments: the ``env`` config group (gymnasium ids, Atari) and the vector-env adapter."""

__all__: list[str] = []
