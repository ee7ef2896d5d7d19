"""border-py's version: the one place it is written (the package's build metadata reads it too)."""

__version__ = "0.3.0"
