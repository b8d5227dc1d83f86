"""Hinted claims: an async waiter woken with others takes the ready item its channel handed it.

A channel (``watchhub``) wakes as many waiters as its look saw ready items. Claiming in queue
order, they would all read the first item and all but one would conflict and back off: on a
cluster, wake-ups of hundreds of milliseconds. So the look hands each woken waiter the key of a
ready item that no other waiter still attempting holds (its *hint*), and the waiter's claim takes
that item, with a read conflict on it alone. The hinted items are the first ready ones in queue
order, so the waiters woken together take what claims in order would have taken, only not one
after another. When the hint is gone (another process took it), the claim takes the first ready
item as any claim does. Queues with key limits or split by tenant choose their own items, and
claims from the max end are not hinted.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from . import keylimits, keys, visibility
from .catalog import Entry
from .reading import promote_and_walk
from ..records import now_micros


class HintedItem(NamedTuple):
    """The hinted item as a claim takes it (a key-value, as the walks return)."""

    key: bytes
    value: bytes


def applies(entry: Entry, qk: keys.QueueKeys, end: str, hint: bytes) -> bool:
    """May a claim of ``end`` take ``hint`` on this queue (an item key of its own, no key limits, no tenants)?"""
    return (
        bool(hint)
        and end == "min"
        and not entry.tenants
        and keylimits.of(entry) is None
        and qk.items.range().start <= hint < qk.items.range().stop
    )


def first_reads(tr: Any, qk: keys.QueueKeys, hint: bytes) -> tuple[int, Any, Any]:
    """Send, without waiting, the time, what is due and the hinted item's read (an ordinary one:
    the claim conflicts with whoever else takes that item, and with no one else)."""
    now_us = now_micros()
    return now_us, visibility.due(tr, qk, now_us), tr[hint]


def choose(tr: Any, entry: Entry, qk: keys.QueueKeys, hint: bytes, sent: tuple[int, Any, Any]) -> Any:
    """The hinted item while it is still ready; else the first ready item; None when none is."""
    now_us, due, found = sent
    visibility.promote(tr, qk, entry, now_us, rows=due)
    if found.present():
        return HintedItem(hint, bytes(found))
    kvs, _cut = promote_and_walk(tr, entry, qk, "min", 1)
    return kvs[0] if kvs else None
