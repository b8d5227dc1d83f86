"""Prometheus metrics for the queues, served at a URL the project mounts.

Optional: it needs ``prometheus-client`` (the app's ``metrics`` extra); without it this package
and its ``urls`` still import, and the endpoint answers 501 saying what to install. One job per
module: ``collectors`` (per-queue gauges read from the store at scrape time), ``workflows``
(workflows by status, read the same way), ``instruments``
(per-process counters fed by ``service.observe`` and ``fdbapi.retry_counts()``),
``exposition`` (what one scrape reads, and in which format), ``views`` (the endpoint, guarded
like the REST API) and ``urls``. The listener is registered when ``views`` is first imported,
not in ``AppConfig.ready``; a process that loads no URLconf may call :func:`install` itself.

Why then, and how to mount, guard and scrape the endpoint: the metrics guide
(docs/howto/metrics.md); the code map (docs/explanation/code-map.md) has the modules.
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
