"""Public pops and peeks: ``pop`` at either end (plain or high-contention), its spellings, ``pop_many``.

A plain pop is one transaction (``reading.pop_n``); a high-contention pop stages requests that
any popper serves in batches (``contention``). ``wait=`` blocks on a watch (``waiting``).
"""

from __future__ import annotations

from typing import Literal

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import DatabaseOrTransaction, is_transaction

from ._internals import checks, contention, items, reading
from .observe import observed
from .records import Item
from ._internals.waiting import blocking

#: Pop modes: one transaction (joins the caller's), or staged requests for contended queues.
PLAIN = "plain"
HIGH_CONTENTION = "high-contention"
POP_MODES = (PLAIN, HIGH_CONTENTION)
PopMode = Literal["plain", "high-contention"]
# A range read's limit is a C int in FoundationDB's client.
MAX_POP_MANY = 2**31 - 1


@observed(none_is_empty=True)
def pop(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    end: str = "min",
    *,
    mode: PopMode = "plain",
    timeout: float | None = None,
    wait: float | None = None,
) -> Item | None:
    """Remove and return the next item from ``end`` ("min" or "max"); None when empty.

    ``mode="plain"`` (the default) is one transaction, and joins the caller's when given one.
    ``mode="high-contention"`` is for many clients popping one queue at once: pops that meet
    contention stage a request and are served in batches (see ``service/_internals/contention.py``). It
    needs the database, not a transaction, and gives up after ``timeout`` seconds (default 5)
    with ``FDBError`` 1031. ``wait`` (seconds) blocks until an item is visible or the time is
    up (then None), woken by a watch.
    """
    checks.check_name(name)
    checks.check_end(end)
    if mode == HIGH_CONTENTION:
        return blocking(db_or_tr, name, end, wait, lambda: contention.pop(db_or_tr, name, end, timeout=timeout))
    if mode != PLAIN:
        raise InvalidArgument(f"mode must be {PLAIN!r} or {HIGH_CONTENTION!r}, not {mode!r}.", mode=str(mode))
    if timeout is not None:
        raise InvalidArgument(
            "timeout applies to mode='high-contention'; a plain pop is bounded by FDBQUEUE['TIMEOUT']."
        )

    def once() -> Item | None:
        popped, _cut = reading.pop_n(db_or_tr, name, end, 1, None)
        return popped[0] if popped else None

    return blocking(db_or_tr, name, end, wait, once)


def pop_min(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    *,
    mode: PopMode = "plain",
    timeout: float | None = None,
    wait: float | None = None,
) -> Item | None:
    """The earliest-pushed item of the lowest priority."""
    return pop(db_or_tr, name, "min", mode=mode, timeout=timeout, wait=wait)


def pop_max(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    *,
    mode: PopMode = "plain",
    timeout: float | None = None,
    wait: float | None = None,
) -> Item | None:
    """The earliest-pushed item of the highest priority (the recipe would give the latest)."""
    return pop(db_or_tr, name, "max", mode=mode, timeout=timeout, wait=wait)


def dequeue(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    *,
    mode: PopMode = "plain",
    timeout: float | None = None,
    wait: float | None = None,
) -> Item | None:
    """FIFO spelling of ``pop_min``."""
    return pop(db_or_tr, name, "min", mode=mode, timeout=timeout, wait=wait)


@observed(none_is_empty=True)
def peek(db_or_tr: DatabaseOrTransaction, name: str, end: str = "min") -> Item | None:
    """The item ``pop`` would return, without removing it."""
    checks.check_name(name)
    checks.check_end(end)
    return reading.peek_one(db_or_tr, name, end)


def peek_min(db_or_tr: DatabaseOrTransaction, name: str) -> Item | None:
    return peek(db_or_tr, name, "min")


def peek_max(db_or_tr: DatabaseOrTransaction, name: str) -> Item | None:
    return peek(db_or_tr, name, "max")


@observed
def pop_many(db_or_tr: DatabaseOrTransaction, name: str, n: int, end: str = "min") -> list[Item]:
    """Pop up to ``n`` items from ``end`` in pop order, in as few transactions as the limits allow."""
    checks.check_name(name)
    checks.check_end(end)
    n = checks.check_count(n, "n", minimum=1, maximum=MAX_POP_MANY)
    if is_transaction(db_or_tr):
        return reading.pop_n(db_or_tr, name, end, n, None)[0]
    popped: list[Item] = []
    while len(popped) < n:
        want = min(n - len(popped), items.POP_BATCH_ITEMS)
        batch, cut = reading.pop_n(db_or_tr, name, end, want, items.BATCH_BYTES)
        popped.extend(batch)
        if len(batch) < want and not cut:
            break  # the queue ran dry
    return popped
