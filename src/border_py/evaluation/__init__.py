"""Evaluation: greedy episodes of the learner's weights, in process or in an evaluator process."""

__all__: list[str] = []
