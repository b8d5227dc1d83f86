"""``manage.py fdbqueue bench``: how fast the queues are here, against FoundationDB's own recipe,
Redis and raw SQLite.

The bench drives the queue service through its public API and ``get_database()``, so it measures
whatever ``FDBQUEUE`` points at: the embedded engine's file or a FoundationDB cluster. With
``--recipe PATH`` it runs FoundationDB's priority-queue recipe (code the user points to; the
project ships none of it) on the same store in the same run; with ``--compare`` the same workloads
run on a private redis-server (sorted sets) and on a plain SQLite table on the same disk (the
project's references: they run from a clone of the repository, see ``references``). It
reports each of our rates divided by the reference's: on a shared or noisy machine absolute rates
drift, ratios measured seconds apart much less.

Modules, one job each:

* ``strategies``: the registry of pop strategies (``--strategy``) and their queue layouts;
* ``targets``: the interface every measured store offers; ``service_target`` implements it for
  our service (the project's benchmarks for FoundationDB's recipe, Redis and raw SQLite);
* ``child``: opening the parent's store in a client process (client library, Django, handle);
* ``workloads``: what one client does per operation;
* ``runner``: clients as threads or spawned processes, the shared timed window;
* ``stats``: latency percentiles and peak memory;
* ``plan``: what a run measures (its configuration) and the rows in their order;
* ``suite``: the run itself: targets, rows in order, the tasks rows, the run's metadata;
* ``measure``: one row's timed windows, prefilling, the exactly-once check;
* ``references``: the hook that finds the project's references (Redis, raw SQLite and
  django-tasks' database backend): the repository's ``benchmarks`` package, beside the app and not
  in its wheel;
* ``results``: the rows and what they mean together (the ratios, the memory check);
* ``goals``: the figures the project has goals for, each against its goal;
* ``store_info``: a cluster's layout and storage engine, named beside every figure;
* ``task_rows`` and ``tasks``: the tasks rows (Django Tasks through the app's backend, against the
  framework's ImmediateBackend) and the task they run;
* ``progress`` and ``report``: what the user sees during and after the run.

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
