"""Queues split by tenant: the keys of the tenants and how items enter their sub-queues.

A queue created with ``tenants=True`` keeps its items where every queue keeps them (``keys``),
each carrying its tenant (:class:`~keys.ItemMeta`), plus two more structures under ``"e"``
(QuiCK's two-level design: a queue of tenants, each with its own items)::

    root / "q" / queue_id / "e" / "i" / tenant / priority / vs -> meta...   a tenant's ready items
    root / "q" / queue_id / "e" / "r" / turn / tenant          -> b""      the tenants, by turn
    root / "q" / queue_id / "e" / "t" / tenant                 -> b""      the tenant has a turn
    root / "q" / queue_id / "e" / "s" / tenant                 -> 8-byte counter  its ready items
    root / "q" / queue_id / "e" / "n"                          -> 8-byte counter  tenants with a turn

How items and tenants enter and leave the ring, and which operations conflict: the tenants guide,
"How it works, and what it costs" (docs/howto/tenants.md). The turns themselves are ``tenantturns``.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import fdb

from . import checks, keys
from .catalog import counter_bytes

from .catalog import TENANTS

#: Longest tenant name, in bytes of UTF-8 (the tenant is in every key of its sub-queue).
TENANT_MAX_BYTES = 100
_ONE = counter_bytes(1)
MINUS_ONE = counter_bytes(-1)


def check_tenant(tenant: object) -> str:
    """A tenant: a non-empty string of at most TENANT_MAX_BYTES bytes of UTF-8."""
    return checks.check_label(tenant, "tenant", TENANT_MAX_BYTES)


def check_fits(name: str, split: bool, tenant: str | None) -> None:
    """A tenant queue takes only pushes with a tenant; any other queue only pushes without."""
    if split and tenant is None:
        raise InvalidArgument(
            f"Queue {name!r} is split by tenant: every push needs tenant=...", field="tenant", name=name
        )
    if not split and tenant is not None:
        raise InvalidArgument(
            f"Queue {name!r} is not split by tenant: push without tenant= (or create the queue with tenants=True).",
            field="tenant",
            name=name,
        )


class TenantKeys:
    """The ``"e"`` subspaces of one queue."""

    __slots__ = ("index", "ring", "members", "sizes", "count")

    def __init__(self, qk: keys.QueueKeys) -> None:
        space = qk.space[TENANTS]
        self.index = space["i"]
        self.ring = space["r"]
        self.members = space["t"]
        self.sizes = space["s"]
        self.count = space.pack(("n",))


def of(qk: keys.QueueKeys) -> TenantKeys:
    return TenantKeys(qk)


def enter(tr: Any, tk: TenantKeys, tenant: str) -> None:
    """Give the tenant a turn at the back of the ring, unless it has one."""
    member = tk.members.pack((tenant,))
    if tr[member].present():
        return
    r = tk.ring.range()
    last = None
    for kv in tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True):
        last = tk.ring.unpack(bytes(kv.key))[0]
    tr[tk.ring.pack((0 if last is None else last + 1, tenant))] = b""
    tr[member] = b""
    tr.add(tk.count, _ONE)


def leave(tr: Any, tk: TenantKeys, turn: int, tenant: str) -> None:
    """The tenant's sub-queue is empty: out of the ring."""
    del tr[tk.ring.pack((turn, tenant))]
    del tr[tk.members.pack((tenant,))]
    tr.add(tk.count, MINUS_ONE)


def pushed(tr: Any, qk: keys.QueueKeys, priority: int, stamp: Any, meta: keys.ItemMeta) -> None:
    """A push's item (stamp incomplete until commit) into its tenant's sub-queue."""
    tk = of(qk)
    tr.set_versionstamped_key(
        tk.index.pack_with_versionstamp((meta.tenant, priority, stamp)), fdb.tuple.pack(meta.elements())
    )
    tr.add(tk.sizes.pack((meta.tenant,)), _ONE)
    enter(tr, tk, meta.tenant)  # type: ignore[arg-type]


def ready(tr: Any, qk: keys.QueueKeys, priority: int, stamp: Any, meta: keys.ItemMeta) -> None:
    """An item ready again (its place known) back in its tenant's sub-queue."""
    tk = of(qk)
    tr[tk.index.pack((meta.tenant, priority, stamp))] = fdb.tuple.pack(meta.elements())
    tr.add(tk.sizes.pack((meta.tenant,)), _ONE)
    enter(tr, tk, meta.tenant)  # type: ignore[arg-type]


def taken(tr: Any, tk: TenantKeys, tenant: str, index_key: bytes) -> None:
    del tr[index_key]
    tr.add(tk.sizes.pack((tenant,)), MINUS_ONE)


def clear(tr: Any, qk: keys.QueueKeys) -> None:
    """Forget every tenant (the queue's items are being cleared)."""
    r = qk.space[TENANTS].range()
    tr.clear_range(r.start, r.stop)
