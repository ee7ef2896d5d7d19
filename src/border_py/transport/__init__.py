"""The channels between processes: transition batches in, weights out."""
