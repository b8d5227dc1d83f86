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
from django_fdbqueue.service import catalog

from .history import History


@transactional
def counters(tr: Any, queue: str) -> dict[str, int]:
    """The stored lease counter of every key of ``queue`` (a counter at zero is cleared)."""
    _entry, qk = catalog.require(tr, queue)
    r = qk.key_counts.range()
    return {
        qk.key_counts.unpack(bytes(kv.key))[0]: int.from_bytes(bytes(kv.value), "little", signed=True)
        for kv in tr.get_range(r.start, r.stop)
    }


class KeySlots:
    """Checks the counters against the leases (see the module); each wrong key is reported once."""

    def __init__(self, db: Any, history: History) -> None:
        self.db = db
        self.history = history
        self.reported: set[tuple[str, str]] = set()

    def check(self, queue: str, leases: collections.Counter[str]) -> None:
        """Each key's counter equals ``leases``: the leases of that key stored now."""
        stored = counters(self.db, queue)
        for key in sorted(set(stored) | set(leases)):
            count, held = stored.get(key, 0), leases[key]
            if count != held and (queue, key) not in self.reported:
                self.reported.add((queue, key))
                self.history.violate("key-slots", f"key {key!r} of {queue!r} counts {count} leases, {held} stored")

    def drained(self, queue: str) -> None:
        """No key of a drained queue holds a slot."""
        self.check(queue, collections.Counter())
