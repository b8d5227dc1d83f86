"""Queues split by tenant: tenants take turns, empty tenants leave, everything else still works,
bad input stores nothing, and a small fairness run (A 2,000 items, B 20 a little later).

Every test runs per engine through `fdbqueue_db`.
"""

from __future__ import annotations

import pytest

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service._internals import catalog, tenantkeys, tenantturns
from django_fdbqueue.service.extension import runtime


@pytest.fixture
def one_choice(monkeypatch):
    """Exact round robin: a consumer always takes the tenant at the front."""
    monkeypatch.setattr(tenantturns, "CHOICES", 1)


@transactional
def _ring(tr, name):
    """The tenants in the ring, in turn order."""
    _entry, qk = catalog.require(tr, name)
    tk = tenantkeys.of(qk)
    r = tk.ring.range()
    return [tk.ring.unpack(bytes(kv.key))[1] for kv in tr.get_range(r.start, r.stop)]


def test_tenants_take_turns_and_empty_tenants_leave(fdbqueue_db, one_choice):
    db = fdbqueue_db
    info = service.create_queue(db, "t", tenants=True)
    assert info.tenants == 0
    service.push_many(db, "t", [f"a{i}" for i in range(5)], tenant="A")
    service.push_many(db, "t", [f"b{i}" for i in range(2)], tenant="B")
    service.push(db, "t", "c0", tenant="C")
    assert service.get_queue(db, "t").tenants == 3
    assert service.tenant_sizes(db, "t") == [("A", 5), ("B", 2), ("C", 1)]
    assert service.peek(db, "t").value == "a0"
    got = [service.pop(db, "t").value for _ in range(8)]
    assert got == ["a0", "b0", "c0", "a1", "b1", "a2", "a3", "a4"]
    assert service.pop(db, "t") is None
    info = service.get_queue(db, "t")
    assert (info.tenants, info.size, info.popped) == (0, 0, 8)
    assert _ring(db, "t") == []
    assert service.tenant_sizes(db, "t") == []


def test_a_tenant_that_returns_goes_to_the_back(fdbqueue_db, one_choice):
    db = fdbqueue_db
    service.create_queue(db, "t", tenants=True)
    service.push_many(db, "t", ["a0", "a1"], tenant="A")
    service.push(db, "t", "b0", tenant="B")
    assert service.pop(db, "t").value == "a0"
    assert service.pop(db, "t").value == "b0"  # B empty: out of the ring
    service.push(db, "t", "b1", tenant="B")  # B comes back behind A
    assert [service.pop(db, "t").value for _ in range(2)] == ["a1", "b1"]


def test_pop_many_takes_turns_too(fdbqueue_db, one_choice):
    db = fdbqueue_db
    service.create_queue(db, "t", tenants=True)
    service.push_many(db, "t", list(range(4)), tenant="A")
    service.push_many(db, "t", list(range(10, 12)), tenant="B")
    assert [i.value for i in service.pop_many(db, "t", 10)] == [0, 10, 1, 11, 2, 3]


def test_priorities_within_a_tenant(fdbqueue_db, one_choice):
    db = fdbqueue_db
    service.create_queue(db, "p", "priority", tenants=True)
    service.push(db, "p", "low", 1, tenant="A")
    service.push(db, "p", "high", 9, tenant="A")
    service.push(db, "p", "b", 5, tenant="B")
    assert service.peek(db, "p", "max").value == "high"
    assert [service.pop(db, "p", "max").value for _ in range(3)] == ["high", "b", "low"]


def test_claim_ack_release_and_dead_letters(fdbqueue_db, one_choice):
    db = fdbqueue_db
    service.create_queue(db, "t", tenants=True, max_attempts=1)
    service.push_many(db, "t", ["a0", "a1"], tenant="A")
    service.push(db, "t", "b0", tenant="B")
    first = service.claim(db, "t")
    second = service.claim(db, "t")
    assert (first.item.value, second.item.value) == ("a0", "b0")
    assert service.get_queue(db, "t").leased == 2
    service.ack(db, first.receipt)
    assert service.release(db, second.receipt) == "dead"  # max_attempts=1
    letters = service.dead_letters(db, "t").items
    assert [d.item.value for d in letters] == ["b0"]
    service.requeue_dead_letter(db, "t", letters[0].item.id)  # back in B's sub-queue
    assert service.get_queue(db, "t").tenants == 2
    service.set_max_attempts(db, "t", None)
    third = service.claim(db, "t")
    assert third.item.value == "a1"
    service.extend(db, third.receipt, 60)
    assert service.release(db, third.receipt) == "ready"  # back in A's sub-queue, at its place
    assert [service.pop(db, "t").value for _ in range(2)] == ["b0", "a1"]
    info = service.get_queue(db, "t")
    assert (info.size, info.leased, info.dead, info.tenants) == (0, 0, 0, 0)


def test_expired_lease_comes_back_to_its_tenant(fdbqueue_db, clock, one_choice):
    db = fdbqueue_db
    service.create_queue(db, "t", tenants=True)
    service.push(db, "t", "a0", tenant="A")
    assert service.claim(db, "t", lease=5).item.value == "a0"
    assert service.pop(db, "t") is None
    clock.advance(10)
    assert service.claim(db, "t").item.value == "a0"


def test_clear_forgets_tenants(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "t", tenants=True)
    service.push_many(db, "t", [1, 2], tenant="A")
    service.clear(db, "t")
    assert service.get_queue(db, "t").tenants == 0
    assert service.pop(db, "t") is None
    service.push(db, "t", 3, tenant="A")
    assert service.pop(db, "t").value == 3


def _nothing_stored(db):
    for name in ("t", "plain"):
        info = service.get_queue(db, name)
        assert (info.size, info.pushed) == (0, 0)
    assert service.get_queue(db, "t").tenants == 0


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("t", {}, "needs tenant"),
        ("plain", {"tenant": "A"}, "not split by tenant"),
        ("t", {"tenant": "x" * (tenantkeys.TENANT_MAX_BYTES + 1)}, "1 to 100 bytes"),
        ("t", {"tenant": ""}, "1 to 100 bytes"),
        ("t", {"tenant": 7}, "1 to 100 bytes"),
        ("t", {"tenant": "\ud800"}, "1 to 100 bytes"),
    ],
)
def test_bad_tenant_is_refused_and_stores_nothing(fdbqueue_db, name, options, message):
    db = fdbqueue_db
    service.create_queue(db, "t", tenants=True)
    service.create_queue(db, "plain")
    with pytest.raises(InvalidArgument, match=message):
        service.push(db, name, "v", **options)
    with pytest.raises(InvalidArgument, match=message):
        service.push_many(db, name, ["v", "w"], **options)
    _nothing_stored(db)


def test_bad_queue_options(fdbqueue_db):
    db = fdbqueue_db
    with pytest.raises(InvalidArgument, match="true or false"):
        service.create_queue(db, "t", tenants="yes")
    with pytest.raises(InvalidArgument, match="no per-key limits"):
        service.create_queue(db, "t", tenants=True, key_concurrency=2)
    assert not service.queue_exists(db, "t")
    service.create_queue(db, "plain")
    with pytest.raises(InvalidArgument, match="not split by tenant"):
        service.tenant_sizes(db, "plain")
    assert service.get_queue(db, "plain").tenants is None


class _Scripted:
    """Stands in for tenantturns' random source: returns the given picks, records each range."""

    def __init__(self, picks: list[int]) -> None:
        self.picks = picks
        self.ranges: list[int] = []

    def randrange(self, n: int) -> int:
        self.ranges.append(n)
        return self.picks.pop(0)


def test_the_pick_is_spread_over_the_first_choices_tenants(fdbqueue_db, monkeypatch):
    """A consumer picks among the first CHOICES tenants of the ring, not always the first, never
    one further back (every other test sets CHOICES to 1, where the two are the same)."""
    db = fdbqueue_db
    monkeypatch.setattr(tenantturns, "CHOICES", 4)
    picks = _Scripted([1, 0, 3, 2])
    monkeypatch.setattr(runtime, "SHUFFLE", picks)
    service.create_queue(db, "t", tenants=True)
    for tenant in "ABCDE":
        service.push_many(db, "t", [f"{tenant.lower()}0", f"{tenant.lower()}1"], tenant=tenant)
    # The ring goes A B C D E; a tenant served goes to the back, or leaves once empty.
    got = [service.pop(db, "t").value for _ in range(4)]
    assert got == ["b0", "a0", "b1", "e0"]  # B, then A, then B (4th of C D E B), then E
    assert picks.ranges == [4, 4, 4, 4]  # five tenants, the first four to choose from
    assert _ring(db, "t") == ["C", "D", "A", "E"]
    assert service.get_queue(db, "t").tenants == 4


def test_key_limits_are_refused_on_a_tenant_queue_as_at_create(fdbqueue_db, one_choice):
    """Issue 28: the update took limits create refuses, and claims then left the tenant turns."""
    db = fdbqueue_db
    with pytest.raises(InvalidArgument) as at_create:
        service.create_queue(db, "u", tenants=True, key_concurrency=1)
    service.create_queue(db, "t", tenants=True)
    for limits in ({"concurrency": 1}, {"rate": 2.5}, {"concurrency": None, "rate": 3}):
        with pytest.raises(InvalidArgument) as refused:
            service.set_key_limits(db, "t", **limits)
        assert (refused.value.code, refused.value.message, refused.value.context) == (
            at_create.value.code,
            at_create.value.message,
            at_create.value.context,
        )
    info = service.set_key_limits(db, "t", concurrency=None, rate=None)  # no limits: accepted
    assert (info.key_concurrency, info.key_rate, info.tenants) == (None, None, 0)
    service.push_many(db, "t", ["a0", "a1"], tenant="A", key="k")
    service.push(db, "t", "b0", tenant="B", key="k")
    got = [service.claim(db, "t").item.value for _ in range(3)]
    assert got == ["a0", "b0", "a1"]
    assert service.get_queue(db, "t").tenants == 0


def test_limits_stored_on_a_tenant_queue_by_an_older_version_are_ignored(fdbqueue_db, one_choice):
    """Claims still take tenants in turn and keep the tenant count, and the limits can be removed."""
    db = fdbqueue_db
    service.create_queue(db, "t", tenants=True)
    catalog.set_options(db, "t", {"key_concurrency": 1}, lambda tr, qk: None)  # as the old update did
    service.push_many(db, "t", ["a0", "a1"], tenant="A")
    service.push(db, "t", "b0", tenant="B")
    assert [service.claim(db, "t").item.value for _ in range(3)] == ["a0", "b0", "a1"]
    assert service.get_queue(db, "t").tenants == 0
    assert service.set_key_limits(db, "t", concurrency=None).key_concurrency is None


def fairness(db, name: str, big: int, small: int) -> int:
    """A pushes ``big`` items, then B ``small``; one consumer claims and acks until B is done.
    Returns how many of A's items were consumed by then."""
    service.push_many(db, name, [["A", i] for i in range(big)], tenant="A")
    service.push_many(db, name, [["B", i] for i in range(small)], tenant="B")
    used_a = done_b = 0
    while done_b < small:
        lease = service.claim(db, name)
        assert lease is not None
        if lease.item.value[0] == "A":
            used_a += 1
        else:
            done_b += 1
        service.ack(db, lease.receipt)
    return used_a


def test_fairness_small(fdbqueue_db):
    service.create_queue(fdbqueue_db, "fair", tenants=True)
    used_a = fairness(fdbqueue_db, "fair", 2_000, 20)
    # With CHOICES tenants to choose from and two tenants, each turn is a coin toss between
    # them: B's 20 items are done within about 2 x 20 consumed, never near A's 2,000.
    assert used_a <= 2 * 20 + tenantturns.CHOICES * 10, used_a
    info = service.get_queue(fdbqueue_db, "fair")
    assert info.size == 2_000 - used_a and info.tenants == 1


def test_a_high_contention_pop_is_refused_on_a_tenant_queue(fdbqueue_db):
    """It serves staged requests in queue order, not by turns: refused, and nothing is taken."""
    service.create_queue(fdbqueue_db, "t", tenants=True)
    service.push(fdbqueue_db, "t", "a1", tenant="a")
    with pytest.raises(InvalidArgument, match="split by tenant"):
        service.pop(fdbqueue_db, "t", mode="high-contention")
    assert service.size(fdbqueue_db, "t") == 1
    assert service.pop(fdbqueue_db, "t").value == "a1"
