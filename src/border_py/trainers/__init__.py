"""Trainers: the loops that connect sampling, optimization, evaluation and bookkeeping."""
