"""The channels between processes: transition batches in, weights out."""

__all__: list[str] = []
