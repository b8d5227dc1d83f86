"""``manage.py fdbqueue bench``: how fast the queues are on the store ``FDBQUEUE`` points at.

The bench drives the queue service through its public API and ``get_database()``, so it measures
whatever ``FDBQUEUE`` points at: the embedded engine's file or a FoundationDB cluster: push, pop
and claim rates, latency, concurrency as threads and processes, queue depth, wake-ups, each row
checked for exactly-once delivery, with the service's pop modes as strategies.

What measures this project against others is the project's, not the app's, and stays out of the
wheel, in the repository's ``benchmarks`` package beside the app: FoundationDB's recipe
(``--recipe``), Redis and raw SQLite (``--compare``), the comparison pop strategies (random-k,
sharded), the tasks rows with their references, the goals table and the chart (``--plot``). From
a clone the bench finds them through one hook (``references``) and the run is the project's full
one; from the wheel alone they are refused or skipped, saying where they are.

Modules, one job each:

* ``strategies``: the pop strategies (``--strategy``) and their queue layouts;
* ``targets``: the interface every measured store offers; ``service_target`` implements it for
  our service (the project's benchmarks for FoundationDB's recipe, Redis and raw SQLite);
* ``child``: opening the parent's store in a client process (client library, Django, handle);
* ``workloads``: what one client does per operation;
* ``runner``: clients as threads or spawned processes, the shared timed window;
* ``stats``: latency percentiles and peak memory;
* ``plan``: what a run measures (its configuration) and the rows in their order;
* ``task_names``: the names of the tasks rows, which the plan lays out and the report prints;
* ``suite``: the run itself: targets, rows in order, the run's metadata;
* ``measure``: one row's timed windows, prefilling, the exactly-once check;
* ``references``: the hook that finds the project's benchmarks by import path;
* ``results``: the rows and what they mean together (the ratios, the memory check);
* ``latency`` and ``store_info``: the store's commit latency and a cluster's layout, named
  beside every figure;
* ``progress`` and ``report``: what the user sees during and after the run (the table, the JSON).

The bench creates its queues under names starting with ``fdbqueue-bench.`` (the recipe's under
``ROOT/"bench-recipe"``) and deletes them at the end, also when interrupted; the tasks rows
delete the task results they stored too.
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
