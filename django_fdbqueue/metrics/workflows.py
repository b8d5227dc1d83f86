"""Workflows by status, read from the store when Prometheus scrapes (with the queue metrics).

One gauge, ``fdbqueue_workflows{backend, status}``: for each ``FDBQueueBackend`` of ``TASKS``, how
many workflows are in each status (``tasks.workflows.workflow_counts``: one range read of the
status listing each, in one transaction), counting up to :data:`COUNT_LIMIT` per status so a
store keeping very many finished workflows cannot make a scrape heavy. Without the Tasks
framework, or when the store cannot be read, the family has no samples (``fdbqueue_store_up``
says whether the store could be read).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

__all__ = ["COUNT_LIMIT", "WorkflowCollector"]

logger = logging.getLogger("django_fdbqueue.metrics")

#: Workflows counted per backend and status at most; a count at the limit means "this many or more".
COUNT_LIMIT = 10_000


def _counts() -> dict[str, dict[str, int]]:
    """backend alias -> status -> count, for every FDBQueueBackend (none without the framework)."""
    try:
        from django_fdbqueue.tasks.queues import configured_backends
    except ImportError:  # no Tasks framework (django.tasks or the django_tasks backport)
        return {}
    from django_fdbqueue.tasks.workflows import workflow_counts

    return {alias: workflow_counts(alias, limit=COUNT_LIMIT) for alias in sorted(configured_backends().ours)}


class WorkflowCollector:
    """A ``prometheus_client`` collector of the workflows gauge (see the module docstring)."""

    def describe(self) -> Iterable[Metric]:
        """The family without samples, so registering this collector reads nothing."""
        return [self._family()]

    def collect(self) -> Iterable[Metric]:
        family = self._family()
        try:
            counts = _counts()
        except Exception as exc:  # noqa: BLE001 - an unreachable store must not fail the scrape
            logger.warning("Metrics could not read the workflows: %s", exc)
            counts = {}
        for alias, by_status in counts.items():
            for status, count in by_status.items():
                family.add_metric([alias, status], count)
        return [family]

    @staticmethod
    def _family() -> Any:
        return GaugeMetricFamily(
            "fdbqueue_workflows",
            "Workflows of a Tasks backend in each status (STORING, RUNNING, SUCCESSFUL, FAILED, "
            f"CANCELLED), counted up to {COUNT_LIMIT} each; finished ones are kept for RESULT_RETENTION.",
            labels=["backend", "status"],
        )
