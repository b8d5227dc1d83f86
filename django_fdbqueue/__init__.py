"""Shared FIFO and double-ended priority queues for Django, stored in FoundationDB."""

# The one place the version is written: pyproject.toml reads it (setuptools' dynamic version).
__version__ = "0.1.0"
