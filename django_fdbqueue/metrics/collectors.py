"""Per queue metrics, read from the store when Prometheus scrapes.

Each queue's statistics (``QueueInfo``) cost a constant number of reads whatever its size, and
``service.list_queues`` reads them a page at a time, each page in its own transaction. One scrape
reads at most ``max_queues`` queues (:data:`DEFAULT_MAX_QUEUES`, in name order) so that a store
with very many queues cannot make scrapes slow or heavy; ``fdbqueue_queues_truncated`` is 1 when
some were left out. Pages are separate transactions, so one scrape is not one snapshot of all
queues (each queue's numbers are consistent among themselves).

The store is shared by every process, so these numbers are right whichever process serves the
scrape, in multiprocess mode too. When the store cannot be read, the queue metrics are left out
and ``fdbqueue_store_up`` is 0: the scrape still succeeds and still carries the process metrics.

Like ``QueueInfo``, an item whose lease or delay ran out is counted where it was (leased,
delayed) until the next pop or claim of its queue moves it back among the ready items.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from django_fdbqueue import service
from django_fdbqueue.connection import get_database
from django_fdbqueue.exceptions import QueueNotFound
from django_fdbqueue.service import QueueInfo

from . import DEFAULT_MAX_QUEUES

#: The families this collector fills: each has ``add_metric(labels, value)``, which Metric lacks.
Family = GaugeMetricFamily | CounterMetricFamily

__all__ = ["DEFAULT_MAX_QUEUES", "PAGE_SIZE", "QueueCollector", "read_queues"]

logger = logging.getLogger("django_fdbqueue.metrics")

#: Queues read per transaction: small enough to stay far below FoundationDB's five seconds.
PAGE_SIZE = 100


def read_queues(
    db: Any, max_queues: int = DEFAULT_MAX_QUEUES, page_size: int = PAGE_SIZE
) -> tuple[list[QueueInfo], bool]:
    """The statistics of the first ``max_queues`` queues by name, and whether more exist."""
    infos: list[QueueInfo] = []
    cursor = None
    while len(infos) < max_queues:
        page = service.list_queues(db, cursor=cursor, limit=min(page_size, max_queues - len(infos)))
        infos.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return infos, False
    return infos, True


class QueueCollector:
    """A ``prometheus_client`` collector of the per queue metrics (see the module docstring)."""

    def __init__(self, database: Callable[[], Any] = get_database, max_queues: int = DEFAULT_MAX_QUEUES) -> None:
        self.database = database
        self.max_queues = max_queues

    def describe(self) -> Iterable[Metric]:
        """The families without samples, so registering this collector reads nothing."""
        return self._families()

    def collect(self) -> Iterable[Metric]:
        """Read the store now and yield every family with its samples."""
        started = time.perf_counter()
        try:
            infos, truncated = read_queues(self.database(), self.max_queues)
        except Exception as exc:  # noqa: BLE001 - an unreachable store must not fail the scrape
            logger.warning("Metrics could not read the queue store: %s", exc)
            infos, truncated, up = [], False, 0
        else:
            up = 1
        families = self._families()
        items, oldest, pushed, popped, count, cut, store_up, duration, *by_key = families
        if up:
            up = _key_limit_samples(self.database(), infos, by_key)
        for info in infos:
            for state, value in (
                ("ready", info.size),
                ("leased", info.leased),
                ("delayed", info.delayed),
                ("dead", info.dead),
            ):
                items.add_metric([info.name, state], value)
            oldest.add_metric([info.name], info.oldest_age_seconds or 0.0)
            pushed.add_metric([info.name], info.pushed)
            popped.add_metric([info.name], info.popped)
        count.add_metric([], len(infos))
        cut.add_metric([], 1 if truncated else 0)
        store_up.add_metric([], up)
        duration.add_metric([], time.perf_counter() - started)
        return families

    def _families(self) -> list[Family]:
        return [
            GaugeMetricFamily(
                "fdbqueue_queue_items",
                "Items stored in the queue, by state: ready (poppable: the queue's depth), leased "
                "(claimed, not acked), delayed (not visible yet), dead (dead letters).",
                labels=["queue", "state"],
            ),
            GaugeMetricFamily(
                "fdbqueue_queue_oldest_item_age_seconds",
                "Seconds since the oldest ready item was pushed (0 when none is ready).",
                labels=["queue"],
            ),
            CounterMetricFamily(
                "fdbqueue_queue_pushed",
                "Items ever pushed to the queue (kept in the store; starts again from 0 when the queue is re-created).",
                labels=["queue"],
            ),
            CounterMetricFamily(
                "fdbqueue_queue_popped",
                "Items ever popped or acked from the queue (kept in the store).",
                labels=["queue"],
            ),
            GaugeMetricFamily("fdbqueue_queues", "Queues this scrape read from the store."),
            GaugeMetricFamily(
                "fdbqueue_queues_truncated",
                f"1 when the store holds more queues than one scrape reads (max_queues, "
                f"{self.max_queues} here), else 0.",
            ),
            GaugeMetricFamily("fdbqueue_store_up", "1 when this scrape could read the queue store, else 0."),
            GaugeMetricFamily(
                "fdbqueue_store_scrape_duration_seconds", "Seconds this scrape spent reading the queue store."
            ),
            *_key_limit_families(),
        ]


#: Keys per limited queue whose leases the metrics show (the busiest): keeps the labels bounded.
TOP_KEYS = 10


def _key_limit_families() -> list[Family]:
    return [
        GaugeMetricFamily(
            "fdbqueue_queue_keys_leased",
            "Keys holding at least one lease, in a queue with per-key limits (key_concurrency, key_rate).",
            labels=["queue"],
        ),
        GaugeMetricFamily(
            "fdbqueue_queue_keys_at_limit",
            f"Keys with as many leases as the queue's key_concurrency allows (at most {TOP_KEYS} counted).",
            labels=["queue"],
        ),
        GaugeMetricFamily(
            "fdbqueue_queue_key_leases",
            f"Leases held by the items of one key, for the {TOP_KEYS} busiest keys of a queue with per-key limits.",
            labels=["queue", "key"],
        ),
    ]


def _key_limit_samples(db: Any, infos: list[QueueInfo], families: list[Family]) -> int:
    """Add the per-key limit state of the queues that have limits (the others cost nothing).
    Returns 0 when the store could not be read (the families then stay empty), else 1."""
    keys_leased, at_limit, key_leases = families
    try:
        states = []
        for info in infos:
            if info.key_concurrency is not None or info.key_rate is not None:
                try:
                    states.append(service.key_limit_state(db, info.name, top=TOP_KEYS))
                except QueueNotFound:  # deleted since it was listed
                    continue
    except Exception as exc:  # noqa: BLE001 - an unreachable store must not fail the scrape
        logger.warning("Metrics could not read the key limits: %s", exc)
        return 0
    for state in states:
        keys_leased.add_metric([state.name], state.keys_leased)
        at_limit.add_metric([state.name], len(state.at_limit))
        for key, count in state.leased:
            key_leases.add_metric([state.name, key], count)
    return 1
