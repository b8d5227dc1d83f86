"""Writes a handler wants committed with its item's ack: one transaction instead of two.

A handler that records what it did in the store returns ``AckWith(step)``: the worker then runs
``step(tr)`` and the ack in one transaction, so they commit together or not at all. When the ack
cannot happen, ``step`` still runs, alone, in a transaction of its own, so it may run twice for
one delivery and must be idempotent. ``after(committed)`` follows the commit; ``failed=True``
has the worker count the acknowledged item as failed.

When each of these applies, with examples: the workers guide, "Commit the handler's own writes
with the ack" (docs/howto/workers.md).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.fdbapi import ErrorCode, FDBError, transactional

__all__ = ["AckWith", "ack_with", "commit_alone", "run_alone"]

logger = logging.getLogger("django_fdbqueue.worker")

#: Conflicts an ack with writes retries itself before leaving the error to the worker.
CONFLICT_RETRIES = 5


class AckWith:
    """A handler's return value: ``step(tr)`` is to commit in the same transaction as the ack."""

    __slots__ = ("step", "after", "failed")

    def __init__(
        self, step: Callable[[Any], Any], after: Callable[[bool], None] | None = None, failed: bool = False
    ) -> None:
        if not callable(step):
            raise TypeError(f"AckWith needs a callable step(tr), not {type(step).__name__}.")
        self.step = step
        self.after = after
        self.failed = failed  # count the acked item as failed (see docs/howto/workers.md)

    def done(self, committed: bool) -> None:
        if self.after is not None:
            self.after(committed)


def ack_with(db: Any, receipt: str, queue: str, settle: AckWith) -> None:
    """``settle.step`` and the ack in one transaction.

    A conflict (1020, which applied nothing) is retried here, up to CONFLICT_RETRIES times with
    the transaction's own short back-off: steps that meet on purpose (a workflow's members
    counting toward one callback) conflict as part of their work, which is not a store error.
    Every other error is the worker's to retry (``Settler._settle``): it retries while the
    lease lasts and, after a lost answer (1021), tells an applied ack from one that was not by
    whether the item is still queued; the step shares the ack's fate either way.
    """
    tr = db.create_transaction()
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            settle.step(tr)
            service.ack(tr, receipt, name=queue)
            tr.commit().wait()
            return
        except FDBError as error:
            if error.code != ErrorCode.NOT_COMMITTED or attempt == CONFLICT_RETRIES:
                raise
            tr.on_error(error).wait()  # backs off, and resets the transaction


def commit_alone(db: Any, settle: AckWith) -> None:
    """The step in a transaction of its own (retried as any), then ``after``; errors propagate."""
    try:
        transactional(lambda tr: settle.step(tr))(db)
    except BaseException:
        settle.done(False)
        raise
    settle.done(True)


def run_alone(db: Any, settle: AckWith, queue: str, item_id: str) -> None:
    """The step in a transaction of its own, for an item that was not acknowledged."""
    try:
        commit_alone(db, settle)
    except Exception:  # noqa: BLE001 - the handler's writes failed: log, and the item runs again
        logger.exception("Could not commit the writes of item %s of queue %r.", item_id, queue)
