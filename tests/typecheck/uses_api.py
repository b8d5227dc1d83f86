"""A user's typed code against the public Python API: tests/test_types.py runs mypy --strict on it
and expects no error. Never imported or run."""

from __future__ import annotations

from typing import Any

from django_fdbqueue import service
from django_fdbqueue.connection import get_database
from django_fdbqueue.engines.embedded.database import EmbeddedDatabase
from django_fdbqueue.fdbapi import Database, DatabaseOrTransaction, Transaction
from django_fdbqueue.worker import Worker, WorkerStats


def send(item: service.Item) -> None:
    print(item.id, item.value, item.attempts)


def produce(db_or_tr: DatabaseOrTransaction, order: str) -> int:
    pushed: service.Item | service.PendingItem = service.push(db_or_tr, "emails", {"order": order}, priority=5)
    print(pushed.priority)
    return service.size(db_or_tr, "emails")


def in_one_transaction(tr: Transaction, order: str) -> None:
    service.push(tr, "billing", {"order": order}, priority=5)
    tr[b"my-app/" + order.encode()] = b"queued"


def consume(db: Database) -> str | None:
    lease: service.Lease | None = service.claim(db, "emails", lease=30, wait=1.0)
    if lease is None:
        return None
    service.ack(db, lease.receipt)
    return lease.receipt


async def consume_async(db: Database) -> Any:
    lease = await service.aclaim(db, "emails", lease=30, wait=1.0)
    if lease is not None:
        await service.aack(db, lease.receipt)
    return await service.apush(db, "emails", {"to": "ada@example.com"}, priority=-3)


def work(db: Database) -> WorkerStats:
    worker = Worker(db, "emails", send, concurrency=4, lease=60, burst=True)
    return worker.run()


def engines() -> None:
    # Both engines' handles are what the service takes (the binding's are untyped, so they fit too).
    embedded: Database = EmbeddedDatabase("store.sqlite3")
    tr: Transaction = embedded.create_transaction()
    produce(embedded, "o-1")
    in_one_transaction(tr, "o-2")
    produce(get_database(), "o-3")
