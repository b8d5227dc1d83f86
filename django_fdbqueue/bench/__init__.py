"""``manage.py fdbqueue bench``: how fast the queues are on the store ``FDBQUEUE`` points at.

The bench drives the queue service through its public API, like any other face, and checks every
row for exactly-once delivery. What measures this project against others (FoundationDB's recipe,
Redis, raw SQLite, the tasks rows, the goals table, the chart) is the project's, in the
repository's ``benchmarks`` package beside the app, and is reached through ``references`` only.

Its modules, one job each, are listed in the code map (docs/explanation/code-map.md); what the
rows measure, and the queues the bench creates, on the performance page
(docs/explanation/performance.md).
"""

from typing import Any

__all__ = ["Bench", "BenchConfig", "BenchResult", "Row"]


def __getattr__(name: str) -> Any:
    # Lazy, so that a client process importing the runner does not import the service for
    # nothing (a process measuring Redis never needs it).
    if name in __all__:
        from . import suite

        return getattr(suite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
