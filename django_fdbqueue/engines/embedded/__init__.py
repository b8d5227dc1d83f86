"""The embedded engine: FoundationDB's Python API and semantics on one SQLite file.

For development, tests and single-machine deployments where no FoundationDB cluster is at
hand. Many threads and processes on one machine may share the file (``storage``), and its
transactions reproduce FoundationDB's conflict rules (``transaction``); the docs' embedded
engine page (docs/explanation/embedded-engine.md) explains both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .database import EmbeddedDatabase
from .faults import FaultConfig, FaultInjector
from .transaction import Transaction

if TYPE_CHECKING:
    from django_fdbqueue.conf import QueueSettings

__all__ = ["EmbeddedDatabase", "FaultConfig", "FaultInjector", "Transaction", "open_database"]


def open_database(settings: "QueueSettings") -> EmbeddedDatabase:
    """Open the embedded database that FDBQUEUE describes."""
    return EmbeddedDatabase(
        str(settings.path),
        timeout=settings.timeout,
        retry_limit=settings.retry_limit,
        faults=settings.faults,
    )
