"""Misuses that tests/test_types.py expects mypy to report, each on a line marked ``# error``.
Never imported or run."""

from __future__ import annotations

from django_fdbqueue import service
from django_fdbqueue.fdbapi import Database
from django_fdbqueue.worker import Worker


def misuse(db: Database) -> None:
    service.push(db, "emails", {"to": "ada@example.com"}, priority="high")  # error: a str priority
    service.push(db, "emails")  # error: no value
    service.claim("emails", lease=30)  # error: no database
    Worker(db, "emails", print, concurrency="4")  # error: a str concurrency
    service.size(db, "emails").upper()  # error: an int has no upper()


async def misuse_async(db: Database) -> None:
    await service.aclaim(db, "emails", lease="30s")  # error: a str lease
