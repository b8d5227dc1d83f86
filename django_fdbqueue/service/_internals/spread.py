"""Spread claims: many claimers of one queue take different items among the first few.

A claim in queue order reads the first ready item with an ordinary read, so claimers that
overlap in time all read the same item and all but one fail at commit (1020), back off and try
again: at a real cluster's commit latency a fleet of workers on one queue gets little more done
than one worker (docs/explanation/performance.md). A *spread* claim (``claim(..., spread=k)``)
reads the first ``k`` ready items with a snapshot read and takes one of them at random, with a
read conflict on that item alone, so overlapping claimers mostly take different items and all
commit; two that pick the same item conflict, and the loser picks again at a newer version.

What it gives up is exact order: an item may be claimed before up to ``k - 1`` items ahead of it
(never before an item beyond the first ``k``). The lease contract is unchanged: each item is
leased to one claimer at a time, hidden until acked, released or expired. At a reused read
version (``fdbapi.choice_reads``) the first items are read with an ordinary read, so what
finished before the claim began is still among what it chooses from. Queues with per-key limits
(whose claims already choose among candidates, ``keyclaims``) and queues split by tenant (whose
claims take tenants in turn) ignore it.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import at_reused_version

from . import checks, keylimits, keys, runtime, visibility
from .catalog import Entry
from .reading import FirstReads
from .reading import head_read, walk
from ..records import now_micros
from .rounds import SnapshotReads

#: The widest spread a claim may ask for (its first read fetches that many items).
MAX_SPREAD = 100


def check(spread: object) -> int | None:
    """``spread`` as given to ``claim``: None (exact order) or 2 to :data:`MAX_SPREAD`."""
    if spread is None:
        return None
    return checks.check_count(spread, "spread", minimum=2, maximum=MAX_SPREAD)


def applies(entry: Entry) -> bool:
    """Does a spread claim spread on this queue (not one with key limits or split by tenant)?"""
    return not entry.tenants and keylimits.of(entry) is None


def _reads(tr: Any) -> Any:
    """Snapshot reads, or ordinary ones at a reused read version (see the module docstring)."""
    return tr if at_reused_version(tr) else SnapshotReads(tr)


def first_reads(tr: Any, qk: keys.QueueKeys, end: str, spread: int) -> FirstReads:
    """Send, without waiting, the time, what is due and the first ``spread`` items' read."""
    now_us = now_micros()
    return now_us, visibility.due(tr, qk, now_us), head_read(_reads(tr), qk, end, spread)


def choose(tr: Any, entry: Entry, qk: keys.QueueKeys, end: str, spread: int, sent: FirstReads) -> Any:
    """One of the first ``spread`` ready items at random (a key-value), with a read conflict on
    it alone; None when none is ready."""
    now_us, due, head = sent
    if visibility.promote(tr, qk, entry, now_us, rows=due):
        head = None  # items moved in: read the first ones again
    if head is not None and end == "min":
        head = list(head)[:spread]
    kvs, _cut = walk(_reads(tr), qk, end, spread, head=head)
    if not kvs:
        return None
    kv = runtime.PICK.choice(kvs)
    tr.add_read_conflict_key(bytes(kv.key))
    return kv
