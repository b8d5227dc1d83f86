"""Shared FIFO and double-ended priority queues for Django, stored in FoundationDB."""

__version__ = "0.1.0"
