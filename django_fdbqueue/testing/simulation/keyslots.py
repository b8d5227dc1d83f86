"""Key slots held equal leases held: the stored per-key counters against a recount of the leases.

A queue counts, per item key, the leases its items hold (``keylimits``): every claim of a keyed
item adds one, and whatever ends the lease (ack, release, a lease that ran out and was moved
back, a cancelled claim given back) takes it off in the same transaction. So, between any two
steps, each key's counter equals its leases still stored (those that ran out included, until an
operation moves them back); once the store is drained, no key holds any. A counter above its
leases keeps the key's slot taken for good (with a limit of 1, its items are never claimed again).
"""

from __future__ import annotations

import collections
from typing import Any

from django_fdbqueue.fdbapi import transactional
from django_fdbqueue import service
from django_fdbqueue.service._internals import catalog

from .history import History


@transactional
def leases_and_counters(tr: Any, history: History, queue: str) -> tuple[collections.Counter[str], dict[str, int]]:
    """In one snapshot: the leases stored per key (those that ran out too), and each key's counter."""
    held: collections.Counter[str] = collections.Counter()
    cursor = None
    while True:
        page = service.scheduled(tr, queue, cursor=cursor, limit=500)
        for entry in page.items:
            push = history.pushes.get(entry.item.value)
            if entry.state == "leased" and push is not None and push.key is not None:
                held[push.key] += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    _entry, qk = catalog.require(tr, queue)
    r = qk.key_counts.range()
    counts = {
        qk.key_counts.unpack(bytes(kv.key))[0]: int.from_bytes(bytes(kv.value), "little", signed=True)
        for kv in tr.get_range(r.start, r.stop)
    }
    return held, counts


class KeySlots:
    """Checks the counters against the leases (see the module); each wrong key is reported once."""

    def __init__(self, db: Any, history: History) -> None:
        self.db = db
        self.history = history
        self.reported: set[tuple[str, str]] = set()

    def check(self, queue: str, leases: collections.Counter[str], stored: dict[str, int]) -> None:
        """Each key's counter (``stored``) equals ``leases``: the leases of that key stored now."""
        for key in sorted(set(stored) | set(leases)):
            count, held = stored.get(key, 0), leases[key]
            if count != held and (queue, key) not in self.reported:
                self.reported.add((queue, key))
                self.history.violate("key-slots", f"key {key!r} of {queue!r} counts {count} leases, {held} stored")

    def drained(self, queue: str) -> None:
        """No key of a drained queue holds a slot."""
        _held, stored = leases_and_counters(self.db, self.history, queue)
        self.check(queue, collections.Counter(), stored)
