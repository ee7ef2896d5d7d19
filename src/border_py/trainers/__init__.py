"""Trainers: the loops that connect sampling, optimization, evaluation and bookkeeping."""

__all__: list[str] = []
