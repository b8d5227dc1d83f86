"""Per-key limits: at most N leases at once, and at most R claims per second, per item key.

An item pushed with ``key=`` carries that key from state to state; a queue's ``key_concurrency``
and ``key_rate`` limit what claims may take of one key. This module keeps each key's lease
counter (given back by whatever ends the lease, in the same transaction), its "at its limit"
marker and its token bucket, and checks the limits; the claim that skips keys at their limit is
``keyclaims``. The keys are listed in ``keys``.

Why the limit holds, what a limited claim costs and how the bucket refills: the key limits guide,
"How it works, and what it costs" (docs/howto/key-limits.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import fdb, transactional

from . import checks, keys
from .catalog import Entry, counter_bytes, require, set_options
from ..records import QueueInfo

#: Longest limit key, in bytes of UTF-8.
KEY_MAX_BYTES = 100
#: Items a limited claim looks at to find one whose key is under its limits.
CANDIDATES = 32
#: "Full" markers a limited claim reads at once (keys past these are checked by their counters).
MARKERS_READ = 256
#: Largest ``key_concurrency``.
CONCURRENCY_MAX = 1_000_000
#: Largest ``key_rate`` (claims per second per key).
RATE_MAX = 1_000_000.0
#: Keys a limit report reads at most.
STATE_KEYS_MAX = 10_000
_ZERO = counter_bytes(0)
_MINUS_ONE = counter_bytes(-1)
_PLUS_ONE = counter_bytes(1)


# --- checks ----------------------------------------------------------------------------------------


def check_key(key: object) -> str:
    """A limit key: a non-empty string of at most KEY_MAX_BYTES bytes of UTF-8."""
    return checks.check_label(key, "key", KEY_MAX_BYTES)


def check_concurrency(value: object) -> int | None:
    """``key_concurrency``: None (no limit) or an integer from 1 to CONCURRENCY_MAX."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= CONCURRENCY_MAX:
        raise InvalidArgument(
            f"key_concurrency must be an integer from 1 to {CONCURRENCY_MAX:,} (or null for no limit); got {value!r}."[
                :300
            ],
            field="key_concurrency",
        )
    return value


def check_rate(value: object) -> float | None:
    """``key_rate``: None (no limit) or a number of claims per second, above 0."""
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = ok and math.isfinite(value) and 0 < value <= RATE_MAX  # type: ignore[arg-type, operator]
    if not ok:
        raise InvalidArgument(
            f"key_rate must be a number of claims per second, above 0 and at most {RATE_MAX:g} "
            f"(or null for no limit); got {value!r}."[:300],
            field="key_rate",
        )
    return float(value)  # type: ignore[arg-type]


def check_not_split(tenants: bool, concurrency: object, rate: object) -> None:
    """Refuse limits on a queue split by tenant: its claims take tenants in turn, not keys."""
    if tenants and (concurrency is not None or rate is not None):
        raise InvalidArgument("A queue split by tenant takes no per-key limits.", field="tenants")


# --- the limits of a queue -------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    concurrency: int | None
    rate: float | None

    @property
    def burst(self) -> float:
        """Most tokens a bucket holds."""
        return max(1.0, self.rate or 0.0)


def of(entry: Entry) -> Limits | None:
    """The queue's limits, or None when it has none (then claims cost what they always did).

    A queue split by tenant has none, even if an older version stored some on it: its claims
    must take tenants in turn (``tenantturns``), which is what keeps its tenant counters true.
    """
    if entry.tenants or (entry.key_concurrency is None and entry.key_rate is None):
        return None
    return Limits(entry.key_concurrency, entry.key_rate)


@transactional
def update(tr: Any, name: str, changes: dict[str, Any]) -> QueueInfo:
    """Store the checked ``changes`` of limits, refused as ``create_queue`` refuses them on a
    queue split by tenant; markers and buckets start afresh when anything changed."""
    entry, _qk = require(tr, name)
    check_not_split(entry.tenants, changes.get("key_concurrency"), changes.get("key_rate"))
    return set_options(tr, name, changes, lambda tr, qk: reset(tr, qk, counts=False))


# --- counting leases -------------------------------------------------------------------------------


def taken(tr: Any, qk: keys.QueueKeys, meta: keys.ItemMeta) -> None:
    """A keyed item was leased: its key holds one more (an atomic add, no read)."""
    if meta.key is not None:
        tr.add(qk.key_counts.pack((meta.key,)), _PLUS_ONE)


def give_back(tr: Any, qk: keys.QueueKeys, entry: Entry, meta: keys.ItemMeta) -> None:
    """A keyed item's lease ended (ack, release, expiry, dead letter): its slot comes back.

    No reads: the counter goes down by an atomic add and is cleared at zero; on a limited queue
    the key's "full" marker goes, and waiting claims are woken.
    """
    if meta.key is None:
        return
    count_key = qk.key_counts.pack((meta.key,))
    tr.add(count_key, _MINUS_ONE)
    tr.compare_and_clear(count_key, _ZERO)
    if of(entry) is not None:
        del tr[qk.key_full.pack((meta.key,))]
        tr.add(qk.wake_key, _PLUS_ONE)


def reset(tr: Any, qk: keys.QueueKeys, *, counts: bool) -> None:
    """Forget markers and buckets (limits changed), and the counters too (the queue was cleared)."""
    if counts:
        r = qk.key_limits.range()
        tr.clear_range(r.start, r.stop)
        return
    for space in (qk.key_full, qk.key_buckets):
        r = space.range()
        tr.clear_range(r.start, r.stop)


# --- token buckets ---------------------------------------------------------------------------------


def tokens(raw: Any, limits: Limits, now_us: int) -> tuple[float, int]:
    """The key's tokens now, refilled by the time elapsed; and when it was last counted."""
    if raw is None or not raw.present():
        return limits.burst, now_us
    left, counted_us = fdb.tuple.unpack(bytes(raw))
    elapsed = max(0, now_us - counted_us) / 1_000_000
    return min(limits.burst, left + elapsed * (limits.rate or 0.0)), counted_us


def spend(tr: Any, qk: keys.QueueKeys, key: str, left: float, now_us: int) -> None:
    tr[qk.key_buckets.pack((key,))] = fdb.tuple.pack((float(left), now_us))


def refund(tr: Any, qk: keys.QueueKeys, entry: Entry, meta: keys.ItemMeta, now_us: int) -> None:
    """Give back the token a claim spent that nobody received (a cancelled async claim)."""
    limits = of(entry)
    if meta.key is None or limits is None or limits.rate is None:
        return
    left, _counted = tokens(tr[qk.key_buckets.pack((meta.key,))], limits, now_us)
    spend(tr, qk, meta.key, min(limits.burst, left + 1.0), now_us)


def next_token_seconds(left: float, limits: Limits) -> float:
    """Seconds until a bucket with ``left`` tokens holds one."""
    return max(0.0, (1.0 - left) / (limits.rate or 1.0))


# --- reporting -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyLimitState:
    """A queue's per-key limits and where its keys stand.

    ``leased`` is the keys holding leases, most first (at most ``top``), each with its count;
    ``at_limit`` the keys with as many leases as ``concurrency`` allows; ``keys_leased`` how many
    keys hold any lease (up to STATE_KEYS_MAX counted). These are the stored counters: a lease
    that ran out counts until the next pop or claim takes it back (claims take it back first).
    """

    name: str
    concurrency: int | None
    rate: float | None
    keys_leased: int
    leased: list[tuple[str, int]]
    at_limit: list[str]


@transactional
def state(tr: Any, name: str, top: int) -> KeyLimitState:
    entry, qk = require(tr, name)
    r = qk.key_counts.range()
    counts = [
        (qk.key_counts.unpack(bytes(kv.key))[0], int.from_bytes(bytes(kv.value), "little", signed=True))
        for kv in tr.snapshot.get_range(r.start, r.stop, limit=STATE_KEYS_MAX)
    ]
    counts = [(key, count) for key, count in counts if count > 0]
    counts.sort(key=lambda pair: (-pair[1], pair[0]))
    full = []
    if entry.key_concurrency is not None:
        full = sorted(key for key, count in counts if count >= entry.key_concurrency)
    return KeyLimitState(name, entry.key_concurrency, entry.key_rate, len(counts), counts[:top], full[:top])
