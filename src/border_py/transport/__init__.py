"""The channels between processes: batches of transitions or sequences in, weights out."""

__all__: list[str] = []
