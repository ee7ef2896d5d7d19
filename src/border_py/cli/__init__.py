"""The ``border`` command line: train, eval, report, tune."""
