"""What one scrape reads and how it is encoded.

Two sources make one answer: the process metrics (``instruments``, plus ``prometheus_client``'s
own process and platform collectors) and the per queue metrics (``collectors``), which are read
from the store at every scrape and never registered in the default registry, so a project that
serves that registry elsewhere does not start reading the store by surprise.

Multiprocess mode: a server with several worker processes (gunicorn ``--workers 4``) answers
each scrape from one of them, whose memory holds only its own counts. When
``PROMETHEUS_MULTIPROC_DIR`` names a directory, every process's ``prometheus_client`` keeps its
metric values in files there, and a scrape sums them with a ``MultiProcessCollector`` instead of
reading this process's registry. The queue metrics need no such help: they come from the store.
"""

from __future__ import annotations

import os
from typing import Any, Iterable

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from . import instruments
from .collectors import DEFAULT_MAX_QUEUES, QueueCollector
from .workflows import WorkflowCollector

__all__ = ["MULTIPROC_ENV", "multiprocess_dir", "process_registry", "render"]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The multiprocess directory when that mode is on, else None."""
    return os.environ.get(MULTIPROC_ENV) or None


def process_registry() -> Any:
    """This process's registry, or in multiprocess mode a fresh one that sums all processes."""
    if multiprocess_dir() is None:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it unannotated
    return registry


class _Scrape:
    """Several collectors read as one, which is all ``prometheus_client``'s encoders ask of a registry."""

    def __init__(self, *sources: Any) -> None:
        self.sources = sources

    def collect(self) -> Iterable[Any]:
        for source in self.sources:
            yield from source.collect()


def render(accept: str = "", *, max_queues: int = DEFAULT_MAX_QUEUES) -> tuple[bytes, str]:
    """The body and content type of one scrape, in the format the ``Accept`` header prefers."""
    instruments.sync_retries()
    encoder, content_type = choose_encoder(accept)
    scrape = _Scrape(process_registry(), QueueCollector(max_queues=max_queues), WorkflowCollector())
    return encoder(scrape), content_type
