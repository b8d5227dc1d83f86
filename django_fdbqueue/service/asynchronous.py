"""The async face of the service: ``apush``, ``apop``, ``aclaim``... for asyncio code and async views.

Each is its sync twin with an ``a`` in front, as Django's async ORM names its methods. They take
the database, never a transaction: they run their transactions on a bounded pool (``offload``).
A waiting pop or claim holds no thread while it waits (``awaiting``, ``watchhub``), and one
cancelled while its transaction runs gives back what it took (``giveback``). A caller that still
has to pass what it got on (an async view, to its client) takes it with :func:`apop_returnable`
or :func:`aclaim_returnable`, with the means to give it back should that fail.

What holds a thread and what does not: docs/reference/python-api.md, "Async operations".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Generic, Iterable, TypeVar, cast

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import Database, is_transaction

from . import consuming, deadletters, popping, pushing, queues
from ._internals import awaiting, checks, giveback, hcclaims, kept, leases, offload
from ._internals import spread as spread_claims
from ._internals.waiting import Blocked
from ._internals.leases import DEFAULT_LEASE_SECONDS
from .observe import observed
from .consuming import ClaimMode
from .popping import HIGH_CONTENTION, PopMode
from .pushing import Codec
from .records import DeadLetter, Item, Lease, Page, PendingItem, QueueInfo

T = TypeVar("T")


def _database(db: Database) -> Database:
    if is_transaction(db):
        raise InvalidArgument(
            "The async operations run their own transactions on a thread pool: pass the database, "
            "not an open transaction (use the sync functions inside a transaction)."
        )
    return db


async def apush(
    db: Database,
    name: str,
    value: Any,
    priority: int = 0,
    *,
    codec: Codec = None,
    delay: float | None = None,
    not_before: dt.datetime | None = None,
    dedup_key: str | None = None,
    key: str | None = None,
    tenant: str | None = None,
) -> Item | PendingItem:
    """``push``, awaited."""
    return await offload.run(
        pushing.push,
        _database(db),
        name,
        value,
        priority,
        codec=codec,
        delay=delay,
        not_before=not_before,
        dedup_key=dedup_key,
        key=key,
        tenant=tenant,
    )


async def apush_many(
    db: Database,
    name: str,
    items: Iterable[Any],
    *,
    codec: Codec = None,
    delay: float | None = None,
    not_before: dt.datetime | None = None,
    key: str | None = None,
    tenant: str | None = None,
) -> list[Item | PendingItem]:
    """``push_many``, awaited."""
    return await offload.run(
        pushing.push_many,
        _database(db),
        name,
        items,
        codec=codec,
        delay=delay,
        not_before=not_before,
        key=key,
        tenant=tenant,
    )


async def apop(
    db: Database,
    name: str,
    end: str = "min",
    *,
    mode: PopMode = "plain",
    timeout: float | None = None,
    wait: float | None = None,
) -> Item | None:
    """``pop``, awaited; with ``wait`` it holds no thread while the queue is empty.

    Cancelled while its transaction runs, it puts the item it took back at its place.
    """
    got = await apop_returnable(db, name, end, mode=mode, timeout=timeout, wait=wait)
    return None if got is None else got.value


@dataclass(frozen=True)
class Returnable(Generic[T]):
    """What an async pop or claim took (``value``), for a caller that may yet fail to pass it on."""

    value: T
    _undo: Callable[[], None]

    def give_back(self) -> None:
        """Give the item back to its queue (a pop's at its place, a claim's lease released and its
        attempt taken back), as a cancelled pop or claim does: on the pool, tried again until it
        succeeds (``offload.undo_later``). Returns at once; call it once."""
        self._undo()


async def apop_returnable(
    db: Database,
    name: str,
    end: str = "min",
    *,
    mode: PopMode = "plain",
    timeout: float | None = None,
    wait: float | None = None,
) -> Returnable[Item] | None:
    """``apop``, with the means to put the item back (:meth:`Returnable.give_back`)."""
    db = _database(db)
    checks.check_name(name)
    checks.check_end(end)

    def attempt(_hint: bytes) -> kept.Taken | None:  # a pop takes the first item: hints are for claims
        with kept.keeping() as found:
            item = popping.pop(db, name, end, mode=mode, timeout=timeout)
        return kept.taken(item, found)

    def put_back(what: kept.Taken) -> None:
        giveback.put_back(db, name, what)

    taken = await awaiting.blocking(db, name, wait, attempt, put_back)
    if taken is None:
        return None
    return Returnable(taken.item, lambda: offload.undo_later(put_back, taken))


async def apeek(db: Database, name: str, end: str = "min") -> Item | None:
    """``peek``, awaited."""
    return await offload.run(popping.peek, _database(db), name, end)


async def apeek_min(db: Database, name: str) -> Item | None:
    """``peek_min``, awaited."""
    return await apeek(db, name, "min")


async def apeek_max(db: Database, name: str) -> Item | None:
    """``peek_max``, awaited."""
    return await apeek(db, name, "max")


@observed(name="claim", none_is_empty=True)
def _claim_once(
    db: Database, name: str, seconds: float, end: str, spreading: int | None, timeout: float | None, hint: bytes
) -> Lease | Blocked | None:
    """One claim transaction, as ``claim`` makes it (reported as a claim); with ``timeout``, a
    high-contention claim (several transactions, up to ``timeout`` seconds in the pool's thread).
    A woken waiter's ``hint`` is the item its channel handed it (``hinted``)."""
    if timeout is not None:
        return hcclaims.claim(db, name, end, seconds, timeout=timeout)
    if spreading is None and hint:
        return leases.claim_hinted_once(db, name, seconds, end, None, None, hint)
    once = leases.claim_once if spreading is None else leases.claim_spread_once
    return once(db, name, seconds, end, None, spreading)


async def aclaim(
    db: Database,
    name: str,
    *,
    lease: float = DEFAULT_LEASE_SECONDS,
    end: str = "min",
    wait: float | None = None,
    spread: int | None = None,
    mode: ClaimMode = "plain",
    timeout: float | None = None,
) -> Lease | None:
    """``claim``, awaited; with ``wait`` it holds no thread while nothing is visible.

    Cancelled while its transaction runs, it releases the lease it took at once, and takes back
    the attempt it counted. (No ``step`` and no ``ack``: what they write commits with the claim,
    and could not be taken back for a caller that went away.) ``mode="high-contention"`` holds a thread of the
    pool while it waits for its turn (up to ``timeout``), as a high-contention ``apop`` does.
    """
    got = await aclaim_returnable(db, name, lease=lease, end=end, wait=wait, spread=spread, mode=mode, timeout=timeout)
    return None if got is None else got.value


async def aclaim_returnable(
    db: Database,
    name: str,
    *,
    lease: float = DEFAULT_LEASE_SECONDS,
    end: str = "min",
    wait: float | None = None,
    spread: int | None = None,
    mode: ClaimMode = "plain",
    timeout: float | None = None,
) -> Returnable[Lease] | None:
    """``aclaim``, with the means to release the lease unused (:meth:`Returnable.give_back`)."""
    db = _database(db)
    checks.check_name(name)
    checks.check_end(end)
    seconds = leases.check_lease(lease)
    spreading = spread_claims.check(spread)
    if consuming.check_mode(mode, spreading, timeout) == HIGH_CONTENTION:
        timeout = hcclaims.DEFAULT_TIMEOUT if timeout is None else timeout

    def undo(got: Any) -> None:
        if isinstance(got, Lease):
            giveback.unclaim(db, got)

    claimed = cast(
        "Lease | None",
        await awaiting.blocking(db, name, wait, partial(_claim_once, db, name, seconds, end, spreading, timeout), undo),
    )
    if claimed is None:
        return None
    return Returnable(claimed, lambda: offload.undo_later(undo, claimed))


async def aack(db: Database, receipt: str, *, name: str | None = None) -> None:
    """``ack``, awaited."""
    return await offload.run(consuming.ack, _database(db), receipt, name=name)


async def arelease(db: Database, receipt: str, *, delay: float = 0, name: str | None = None) -> str:
    """``release``, awaited."""
    return await offload.run(consuming.release, _database(db), receipt, delay=delay, name=name)


async def aextend(
    db: Database, receipt: str, lease: float | None = None, *, name: str | None = None, seconds: float | None = None
) -> Lease:
    """``extend``, awaited."""
    return await offload.run(consuming.extend, _database(db), receipt, lease, name=name, seconds=seconds)


async def asize(db: Database, name: str) -> int:
    """``size``, awaited."""
    return await offload.run(queues.size, _database(db), name)


async def aget_queue(db: Database, name: str) -> QueueInfo:
    """``get_queue`` (the queue's kind and statistics), awaited."""
    return await offload.run(queues.get_queue, _database(db), name)


async def adead_letters(db: Database, name: str, *, cursor: str | None = None, limit: int = 50) -> Page[DeadLetter]:
    """``dead_letters``, awaited."""
    return await offload.run(deadletters.dead_letters, _database(db), name, cursor=cursor, limit=limit)


async def arequeue_dead_letter(db: Database, name: str, item_id: str) -> Item:
    """``requeue_dead_letter``, awaited."""
    return await offload.run(deadletters.requeue_dead_letter, _database(db), name, item_id)


async def adelete_dead_letter(db: Database, name: str, item_id: str) -> None:
    """``delete_dead_letter``, awaited."""
    return await offload.run(deadletters.delete_dead_letter, _database(db), name, item_id)
