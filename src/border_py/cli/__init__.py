"""The ``border`` command line: train, eval, report, tune."""

__all__: list[str] = []
