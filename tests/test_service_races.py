"""Races decided by conflicts, made deterministic: two transactions opened by hand, each given to a
service function, both before either commits; then the commits, in a chosen order.

Each pair takes *different* items, so nothing but the guarantee under test makes them conflict:
a min-end and a max-end operation on a priority queue read disjoint ends. The order of commits
is chosen so that the second one's only conflict is that guarantee's read conflict (the max-end
walk reads every item it passes, the min-end claim of a limited queue only the one it takes).
Every test runs per engine through `fdbqueue_db`.
"""

from __future__ import annotations

import pytest

from django_fdbqueue import service
from django_fdbqueue.fdbapi import FDBError

NOT_COMMITTED = 1020


def _both_open(db):
    return db.create_transaction(), db.create_transaction()


def _refused(tr) -> int:
    """Commit ``tr``, which must fail: its FoundationDB error code."""
    with pytest.raises(FDBError) as caught:
        tr.commit().wait()
    return caught.value.code


def test_two_claims_of_the_last_slot_of_a_key_conflict(fdbqueue_db):
    """Two items of one key, a limit of 1: two claims that each take one (one from each end)
    must not both commit, or the key holds 2 leases under a limit of 1."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority", key_concurrency=1)
    service.push(db, "q", "low", priority=1, key="k")
    service.push(db, "q", "high", priority=9, key="k")
    from_min, from_max = _both_open(db)
    assert service.claim(from_min, "q", end="min").item.value == "low"
    assert service.claim(from_max, "q", end="max").item.value == "high"
    from_max.commit().wait()
    assert _refused(from_min) == NOT_COMMITTED  # only the key's counter, read by both, is shared
    info = service.get_queue(db, "q")
    assert (info.size, info.leased) == (1, 1)
    assert dict(service.key_limit_state(db, "q").leased) == {"k": 1}
    assert service.claim(db, "q") is None  # the key is still at its limit


def test_two_pops_that_promote_the_same_due_item_conflict(fdbqueue_db, clock):
    """A delayed item comes due; a pop at each end moves it into the ready items and takes
    another item. Only one may move it, or the queue counts it twice."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority")
    service.push(db, "q", "low", priority=1)
    service.push(db, "q", "high", priority=9)
    service.push(db, "q", "due", priority=5, delay=5)
    clock.advance(6)
    from_min, from_max = _both_open(db)
    assert service.pop(from_min, "q", end="min").value == "low"
    assert service.pop(from_max, "q", end="max").value == "high"
    from_min.commit().wait()
    assert _refused(from_max) == NOT_COMMITTED  # both moved "due": its hidden entry is shared
    info = service.get_queue(db, "q")
    assert (info.size, info.delayed, info.popped) == (2, 0, 1)
    got = [service.pop(db, "q", end="max") for _ in range(3)]
    assert [item.value for item in got[:2]] == ["high", "due"] and got[2] is None
