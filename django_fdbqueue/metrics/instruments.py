"""Per process instruments: queue operations, their latency, and FoundationDB retries.

Operations and latencies come from the service's hook (``service.observe``): :func:`record` is
the listener, registered by :func:`install`. FoundationDB errors come from
``fdbapi.retry_counts()``, which counts every error a transaction handed to ``on_error`` (a
conflict is code 1020); :func:`sync_retries` adds what is new since its last call to a real
counter. It runs at every scrape and after every observed operation, so in multiprocess mode
each process's retries reach its metric file (a scrape, served by one process, could not read
another process's memory).

These are ordinary ``prometheus_client`` metrics in its default registry, so in multiprocess
mode (``PROMETHEUS_MULTIPROC_DIR`` set before ``prometheus_client`` is imported) they are kept in
that directory's files like any other.
"""

from __future__ import annotations

import threading

from prometheus_client import Counter, Histogram

from django_fdbqueue import fdbapi
from django_fdbqueue.access import events as access_events
from django_fdbqueue.service import observe

__all__ = [
    "OPERATIONS",
    "LATENCY",
    "RETRIES",
    "AUDIT_EVENTS",
    "REFUSALS",
    "LATENCY_BUCKETS",
    "error_name",
    "record",
    "record_access",
    "sync_retries",
    "install",
    "uninstall",
]

#: Seconds. Embedded-store operations take well under a millisecond, cluster ones a few; the
#: upper buckets catch retries, back-offs and the five-second transaction limit.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

OPERATIONS = Counter(
    "fdbqueue_operations",
    "Queue service calls made by this process, by operation and outcome (ok, empty, refused, fdb_error, error).",
    ["operation", "outcome"],
)
LATENCY = Histogram(
    "fdbqueue_operation_duration_seconds",
    "Wall time of queue service calls made by this process, retries included, by operation.",
    ["operation"],
    buckets=LATENCY_BUCKETS,
)
RETRIES = Counter(
    "fdbqueue_fdb_retries",
    "FoundationDB errors this process's transactions met and handed to on_error, by error code "
    "(1020: conflict). Retryable codes were retried.",
    ["code", "error"],
)

AUDIT_EVENTS = Counter(
    "fdbqueue_audit_events",
    "Changes made for a person through the REST API or the admin and recorded in the audit log, "
    "by the access action they needed (manage, delete, ...).",
    ["action"],
)
REFUSALS = Counter(
    "fdbqueue_access_refusals",
    "Requests refused by queue grants (403, or 404 for a queue the user may not see), by the "
    "access action they needed.",
    ["action"],
)

# The codes fdbapi names, plus the retryable ones it lists by number only.
_NAMES = {
    value: name.lower() for name, value in vars(fdbapi.ErrorCode).items() if name.isupper() and isinstance(value, int)
}
_NAMES.update(
    {
        1042: "commit_proxy_memory_limit_exceeded",
        1051: "batch_transaction_throttled",
        1078: "grv_proxy_memory_limit_exceeded",
        1213: "tag_throttled",
    }
)


def error_name(code: int) -> str:
    """FoundationDB's name for an error code ("other" for codes this app never names)."""
    return _NAMES.get(code, "other")


_seen: dict[int, int] = {}
_sync_lock = threading.Lock()


def sync_retries() -> None:
    """Bring RETRIES up to ``fdbapi.retry_counts()``: add what was counted since the last call."""
    counts = fdbapi.retry_counts()
    with _sync_lock:
        for code, total in counts.items():
            new = total - _seen.get(code, 0)
            if new > 0:
                RETRIES.labels(code=str(code), error=error_name(code)).inc(new)
                _seen[code] = total


def record(operation: str, outcome: str, seconds: float) -> None:
    """The service hook's listener: count the call, time it, and pick up its retries."""
    OPERATIONS.labels(operation=operation, outcome=outcome).inc()
    LATENCY.labels(operation=operation).observe(seconds)
    sync_retries()


def record_access(event: str, action: str) -> None:
    """The access hook's listener: count audit records and refusals."""
    counter = AUDIT_EVENTS if event == access_events.AUDITED else REFUSALS
    counter.labels(action=action).inc()


def install() -> None:
    """Register :func:`record` with the service hook and :func:`record_access` with access's (idempotent)."""
    observe.add_listener(record)
    access_events.add_listener(record_access)


def uninstall() -> None:
    """Stop counting operations, audit records and refusals (the counters keep their values)."""
    observe.remove_listener(record)
    access_events.remove_listener(record_access)
