"""Spread claims: many claimers of one queue take different items among the first few.

A claim in queue order reads the first ready item with an ordinary read, so overlapping claimers
all want the same item and all but one retry. A *spread* claim (``claim(..., spread=k)``) reads
the first ``k`` ready items with a snapshot read and takes one at random, with a read conflict on
that item alone, giving up exact order within those ``k``. Queues with per-key limits
(``keyclaims``) and queues split by tenant ignore it.

How it reads at a reused read version, and what it gives up: docs/explanation/guarantees.md,
"Ordering"; when to use it: docs/howto/workers.md; what it measured: docs/explanation/performance.md.
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
    """Snapshot reads, or ordinary ones at a reused read version (docs/explanation/guarantees.md, "Ordering")."""
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
