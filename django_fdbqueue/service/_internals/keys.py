"""The key layout of the queue layer (its argument checks are in ``checks``, its tokens in ``tokens``).

Everything the service writes lives under the app's root subspace (``FDBQUEUE["ROOT"]``)::

    root / "c" / name                              -> (kind, created_at_us, queue_id)   catalog
    root / "t" / deleted_at_us / token             -> b""                          deletion markers
    root / "q" / queue_id / "i" / priority / vs / meta...  -> payload                ready items
    root / "q" / queue_id / "o" / vs               -> (priority, enqueued_at_us)        push order
    root / "q" / queue_id / "n" / counter          -> 8-byte little-endian int          counters
    root / "q" / queue_id / "r" / end / vs / token -> (deadline_us,)         staged pop requests
    root / "q" / queue_id / "r" / "res" / deadline_us / token / 1 / priority / vs / enqueued_at_us / codec
                                                   -> payload               a request's item
    root / "q" / queue_id / "r" / "res" / deadline_us / token / 0 -> b""   "the queue was empty"
    root / "q" / queue_id / "r" / "res" / deadline_us / token / 2 -> b""   its bell: answered
    root / "q" / queue_id / "r" / "res" / deadline_us / token / 3 -> b""   its bell: run the next round
    root / "q" / queue_id / "r" / "lead" / end     -> (token, until_us)     who runs the rounds
    root / "q" / queue_id / "r" / "rcpt" / epoch / client -> (token, item_id)   receipts
    root / "q" / queue_id / "r" / "c" / end / vs / token -> (deadline_us, lease_us)  staged claims
    root / "q" / queue_id / "r" / "c" / "res" / deadline_us / token / 1 / visible_at_us / priority / vs
                                   / lease_token / meta...  -> payload     the lease a round granted
    root / "q" / queue_id / "r" / "c" / "res" / deadline_us / token / 0|2|3 -> b""   "empty", bells
    root / "q" / queue_id / "r" / "c" / "lead" / end -> (token, until_us)   who runs the claims' rounds
    root / "q" / queue_id / "d" / visible_at_us / priority / vs / lease_token / meta... -> payload
                                                   hidden items: delayed ones and leased ones
    root / "q" / queue_id / "l" / priority / vs   -> (visible_at_us, lease_token, meta...)
                                                   the same hidden items, found by id
    root / "q" / queue_id / "x" / priority / vs / died_at_us / meta... -> payload   dead letters
    root / "q" / queue_id / "k" / "k" / dedup_key -> (priority, vs, enqueued_at_us, kept_until_us)
    root / "q" / queue_id / "k" / "t" / kept_until_us / dedup_key -> b""   when to forget a key
    root / "q" / queue_id / "s" / epoch / lease_token -> outcome   settled leases (for retries in doubt)
    root / "q" / queue_id / "s" / epoch / "dead" / priority / vs -> outcome   settled dead letters
                                                   (a requeue's payload under the same key + "p")
    root / "q" / queue_id / "w"                    -> 8-byte counter      wake-up key for watches
    root / "q" / queue_id / "y" / "n" / key       -> 8-byte counter   leases held by items of a key
    root / "q" / queue_id / "y" / "f" / key       -> b""         the key is at its concurrency limit
    root / "q" / queue_id / "y" / "b" / key       -> (tokens, refilled_at_us)   a key's token bucket
    root / "q" / queue_id / "v" / "m"|"h" / minute|hour / counter -> 8-byte counter   activity
                                                   (per-minute and per-hour counts: ``activity``)
    root / "q" / queue_id / "e" / "i"|"r"|"t"|"s"|"n" / ...   a queue split by tenant: each tenant's
                                                   ready items, the tenants by turn, who has a turn,
                                                   counts (``tenantkeys``)

``meta...`` is ``enqueued_at_us, codec[, attempts[, dedup_key[, key[, tenant]]]]`` (see :class:`ItemMeta`): what
an item carries with it from state to state, trailing defaults left out, so the keys of items
that were never claimed nor deduplicated are exactly the short ones of earlier releases.

An item is in exactly one of four places: ready (``"i"``, in pop order, plus its push-order
entry in ``"o"``), hidden (``"d"`` ordered by the time it becomes visible, plus its ``"l"``
entry), dead (``"x"``), or gone. A hidden item with an empty ``lease_token`` is delayed; with a
token it is leased, and the token is the secret half of its receipt.

The "r" keys belong to high-contention pops (``contention.py`` explains the protocol): a
request is keyed by the versionstamp of the commit that registered it (``end`` is "min" or
"max"), so requests are served in registration order; a result is keyed by its owner's deadline
and random token (the owner knows both, and expired results are one range read away) and
carries the item's own key elements, so an item put back lands exactly where it was; a receipt
(one slot per client thread, overwritten by each of its pops, grouped by the hour) tells a pop
retrying after ``commit_unknown_result`` that its earlier attempt did commit. High-contention
claims (``hcclaims.py``) keep the same layout of requests, results and lead keys under ``"r" /
"c"``; a claim's result records the lease a round granted (the leased item's own key elements).

A deletion marker records that one ``delete_queue`` call committed, so that its retry after
``commit_unknown_result`` knows; markers older than an hour are cleared by later deletes.

``vs`` is a 12-byte tuple-layer versionstamp (commit version + batch order + user version). The
one-letter names keep keys short, since every item key repeats them. "m" stays reserved for
per-queue metadata.

Why the layout is what it is is explained on the data model page (docs/explanation/data-model.md),
which shows the list above as it stands here.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from django_fdbqueue.fdbapi import fdb, tuples

CATALOG = "c"
DELETIONS = "t"
# How long a deletion marker is kept: far longer than any retry loop of the call that wrote it.
DELETION_MARKER_SECONDS = 3600
QUEUES = "q"
ITEMS = "i"
ORDER = "o"
COUNTERS = "n"
STAGING = "r"
RESULTS = "res"
RECEIPTS = "rcpt"
LEAD = "lead"
HIDDEN = "d"
HIDDEN_INDEX = "l"
DEAD = "x"
DEDUP = "k"
DEDUP_RECORDS = "k"
DEDUP_EXPIRY = "t"
SETTLED = "s"
WAKE = "w"
KEY_LIMITS = "y"
RESERVED = ("m",)

SIZE = "size"
PUSHED = "pushed"
POPPED = "popped"
LEASED = "leased"
DELAYED = "delayed"
DEAD_COUNT = "dead"
COUNTERS_ALL = (SIZE, PUSHED, POPPED, LEASED, DELAYED, DEAD_COUNT)

KINDS = ("fifo", "priority")
ENDS = ("min", "max")
# Tags inside the tokens: an item id can never be accepted as a cursor, or one kind of cursor as another.
LEASE_TOKEN_BYTES = 16


# --- the layout -----------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def catalog(root: fdb.Subspace) -> fdb.Subspace:
    return root[CATALOG]


def catalog_key(root: fdb.Subspace, name: str) -> bytes:
    return catalog(root).pack((name,))


@dataclass(frozen=True)
class DeletionMarker:
    """The proof one delete_queue call leaves behind: when it ran, and a token only it knows."""

    deleted_us: int
    token: bytes

    @classmethod
    def new(cls) -> "DeletionMarker":
        return cls(time.time_ns() // 1000, os.urandom(16))

    def key(self, root: fdb.Subspace) -> bytes:
        return root[DELETIONS].pack((self.deleted_us, self.token))

    def expired_before(self, root: fdb.Subspace) -> slice:
        """The markers old enough to forget: those written over DELETION_MARKER_SECONDS before this one."""
        markers = root[DELETIONS]
        cutoff = self.deleted_us - DELETION_MARKER_SECONDS * 1_000_000
        return slice(markers.range().start, markers.pack((cutoff,)))


@dataclass(frozen=True)
class ItemMeta:
    """What an item carries from state to state (ready, hidden, dead) in the tail of its keys.

    Trailing defaults are left out when packed, so an item never claimed and pushed without a
    dedup key has the key layout of earlier releases, and those keys still read back.
    """

    enqueued_us: int
    codec: str
    attempts: int = 0
    dedup: str | None = None
    #: The item's limit key (``push(..., key=...)``): see ``keylimits``.
    key: str | None = None
    #: The item's tenant on a queue split by tenant (``push(..., tenant=...)``): see ``tenantkeys``.
    tenant: str | None = None

    def elements(self) -> tuple[Any, ...]:
        if self.tenant is not None:
            return (self.enqueued_us, self.codec, self.attempts, self.dedup, self.key, self.tenant)
        if self.key is not None:
            return (self.enqueued_us, self.codec, self.attempts, self.dedup, self.key)
        if self.dedup is not None:
            return (self.enqueued_us, self.codec, self.attempts, self.dedup)
        if self.attempts:
            return (self.enqueued_us, self.codec, self.attempts)
        return (self.enqueued_us, self.codec)

    @classmethod
    def from_elements(cls, rest: tuple[Any, ...] | list[Any]) -> "ItemMeta":
        return cls(*rest)

    def claimed(self) -> "ItemMeta":
        return ItemMeta(self.enqueued_us, self.codec, self.attempts + 1, self.dedup, self.key, self.tenant)

    def fresh(self) -> "ItemMeta":
        """Attempts forgotten: a dead letter requeued by hand starts over."""
        return ItemMeta(self.enqueued_us, self.codec, 0, self.dedup, self.key, self.tenant)


@dataclass(frozen=True)
class QueueKeys:
    """The subspaces of one queue's data, addressed by its id (never its name).

    Because data hangs off an id chosen at creation, deleting a queue and creating another with
    the same name can never mix their items, even if a straggling writer raced the delete.
    """

    root: fdb.Subspace
    queue_id: bytes

    @cached_property
    def space(self) -> fdb.Subspace:
        # Every subspace below is made from this one, so all of them pack and unpack through
        # ``fdbapi.tuples``: the same bytes as the binding's tuple layer, in a fraction of the time.
        return tuples.QuickSubspace(rawPrefix=self.root[QUEUES][self.queue_id].key())

    @cached_property
    def items(self) -> fdb.Subspace:
        return self.space[ITEMS]

    @cached_property
    def order(self) -> fdb.Subspace:
        return self.space[ORDER]

    @cached_property
    def counters(self) -> fdb.Subspace:
        return self.space[COUNTERS]

    @cached_property
    def _counter_keys(self) -> dict[str, bytes]:
        return {which: self.counters.pack((which,)) for which in COUNTERS_ALL}

    def counter(self, which: str) -> bytes:
        return self._counter_keys[which]

    @cached_property
    def staging(self) -> fdb.Subspace:
        """Everything of high-contention pops: requests, results, receipts."""
        return self.space[STAGING]

    @cached_property
    def _request_spaces(self) -> dict[str, fdb.Subspace]:
        return {end: self.staging[end] for end in ENDS}

    def requests(self, end: str) -> fdb.Subspace:
        """Pop requests waiting for ``end``, in the order their registrations committed."""
        return self._request_spaces[end]

    @cached_property
    def results(self) -> fdb.Subspace:
        return self.staging[RESULTS]

    @cached_property
    def receipts(self) -> fdb.Subspace:
        return self.staging[RECEIPTS]

    def lead(self, end: str) -> bytes:
        """Which staged pop runs the fulfil rounds of ``end`` now, and until when."""
        return self.staging.pack((LEAD, end))

    @cached_property
    def hidden(self) -> fdb.Subspace:
        """Delayed and leased items, ordered by the time each becomes visible."""
        return self.space[HIDDEN]

    @cached_property
    def hidden_index(self) -> fdb.Subspace:
        """Hidden items by (priority, vs): one point read finds an item's lease or delay."""
        return self.space[HIDDEN_INDEX]

    @cached_property
    def dead(self) -> fdb.Subspace:
        return self.space[DEAD]

    @cached_property
    def dedup_records(self) -> fdb.Subspace:
        return self.space[DEDUP][DEDUP_RECORDS]

    @cached_property
    def dedup_expiry(self) -> fdb.Subspace:
        return self.space[DEDUP][DEDUP_EXPIRY]

    @cached_property
    def settled(self) -> fdb.Subspace:
        return self.space[SETTLED]

    @cached_property
    def key_counts(self) -> fdb.Subspace:
        """Per limit key: how many of its items are leased now (atomic adds)."""
        return self.space[KEY_LIMITS]["n"]

    @cached_property
    def key_full(self) -> fdb.Subspace:
        """Per limit key at its concurrency limit: a marker a limited claim reads in one range."""
        return self.space[KEY_LIMITS]["f"]

    @cached_property
    def key_buckets(self) -> fdb.Subspace:
        """Per limit key: its token bucket (tokens left, when they were counted)."""
        return self.space[KEY_LIMITS]["b"]

    @cached_property
    def key_limits(self) -> fdb.Subspace:
        """All the per-key limit state of the queue."""
        return self.space[KEY_LIMITS]

    @cached_property
    def wake_key(self) -> bytes:
        """Changed (atomic add) whenever an item becomes visible: what waiting pops watch."""
        return self.space.pack((WAKE,))

    def item_prefix(self, priority: int, stamp: fdb.tuple.Versionstamp) -> bytes:
        """Every item key of (priority, stamp) starts with this; the rest is metadata."""
        return self.items.pack((priority, stamp))

    def priority_range(self, priority: int) -> slice:
        return self.items.range((priority,))


@functools.lru_cache(maxsize=4096)
def queue_keys(root: fdb.Subspace, queue_id: bytes) -> QueueKeys:
    """The (cached) subspaces of one queue: built once per queue, not once per operation."""
    return QueueKeys(root, queue_id)
