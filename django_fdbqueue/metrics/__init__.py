"""Prometheus metrics for the queues, served at a URL the project mounts.

Optional: it needs ``prometheus-client`` (the app's ``metrics`` extra). Without it
the rest of the app works as before, importing this package and its ``urls`` still works, and
the metrics URL answers 501 with a text saying what to install (after the same authentication
and permission checks as every other request to it).

One job per module:

* ``collectors``: per queue gauges (ready, leased, delayed and dead items, oldest item's age)
  and the store's push/pop counters, read from the store at scrape time, a bounded number of
  queues per scrape. The store is shared, so any one process reports them correctly.
* ``instruments``: per process counters and histograms, fed by the service's
  ``service.observe`` hook (operations by outcome, latency) and by ``fdbapi.retry_counts()``
  (FoundationDB errors met and retried, by code).
* ``exposition``: what one scrape reads (this process's registry, or every process's files in
  multiprocess mode) and in which text format.
* ``views``: the endpoint, guarded exactly like the REST API.
* ``urls``: ``path("metrics/", include("django_fdbqueue.metrics.urls"))``.

When the listener is registered: on the first import of ``views`` (so when the project loads a
URLconf that mounts the endpoint), not in ``AppConfig.ready``. That keeps ``prometheus-client``
out of every process that does not serve metrics (management commands, migrations), and in
multiprocess mode it keeps those processes from writing metric files into the shared directory.
A web process runs queue operations only while answering requests, which come after its URLconf
is loaded, so nothing it does is missed. A process that does not load the URLconf (a task
worker, a script) may call :func:`install` itself.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

__all__ = ["DEFAULT_MAX_QUEUES", "MISSING_DEPENDENCY", "available", "install"]

#: Queues one scrape reads at most (about ten reads each, a hundred queues per transaction).
#: Here rather than in ``collectors`` so that ``views`` imports it without prometheus-client.
DEFAULT_MAX_QUEUES = 1000

#: What the endpoint and :func:`install` say when ``prometheus-client`` is not installed.
MISSING_DEPENDENCY = (
    "Prometheus metrics need the prometheus-client package, which is not installed. "
    'Install the app\'s "metrics" extra, or: pip install "prometheus-client>=0.20"'
)


def available() -> bool:
    """True when ``prometheus-client`` can be imported (the ``metrics`` extra is installed)."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


def install() -> None:
    """Start counting this process's queue operations (idempotent).

    The endpoint's module calls it when first imported; call it yourself in a process that
    never loads the URLconf but whose operations you want counted (multiprocess mode).
    """
    try:
        from . import instruments
    except ImportError as exc:
        if not (exc.name or "").startswith("prometheus_client"):
            raise
        raise ImproperlyConfigured(MISSING_DEPENDENCY) from exc
    instruments.install()
