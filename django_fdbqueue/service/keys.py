"""The key layout of the queue layer, and the opaque tokens (item ids, cursors) built from keys.

Everything the service writes lives under the app's root subspace (``FDBQUEUE["ROOT"]``)::

    root / "c" / name                              -> (kind, created_at_us, queue_id)   catalog
    root / "t" / deleted_at_us / token             -> b""                          deletion markers
    root / "q" / queue_id / "i" / priority / vs / enqueued_at_us / codec -> payload     items
    root / "q" / queue_id / "o" / vs               -> (priority, enqueued_at_us)        push order
    root / "q" / queue_id / "n" / counter          -> 8-byte little-endian int          counters
    root / "q" / queue_id / "r" / end / vs / token -> (deadline_us,)         staged pop requests
    root / "q" / queue_id / "r" / "res" / deadline_us / token / 1 / priority / vs / enqueued_at_us / codec
                                                   -> payload               a request's item
    root / "q" / queue_id / "r" / "res" / deadline_us / token / 0 -> b""   "the queue was empty"
    root / "q" / queue_id / "r" / "rcpt" / epoch / client -> (token, item_id)   receipts

The "r" keys belong to high-contention pops (``contention.py`` explains the protocol): a
request is keyed by the versionstamp of the commit that registered it (``end`` is "min" or
"max"), so requests are served in registration order; a result is keyed by its owner's deadline
and random token (the owner knows both, and expired results are one range read away) and
carries the item's own key elements, so an item put back lands exactly where it was; a receipt
(one slot per client thread, overwritten by each of its pops, grouped by the hour) tells a pop
retrying after ``commit_unknown_result`` that its earlier attempt did commit.

A deletion marker records that one ``delete_queue`` call committed, so that its retry after
``commit_unknown_result`` knows; markers older than an hour are cleared by later deletes.

``vs`` is a 12-byte tuple-layer versionstamp (commit version + batch order + user version). The
one-letter names keep keys short, since every item key repeats them. Per-queue letters reserved
for later features, so they can be added without moving existing data: "l" leases, "d" delayed
items, "x" dead letters, "k" deduplication keys, "w" wake-up key for watches, "m" per-queue
metadata. See the package docstring for why the layout is what it is.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import struct
import os
import time
from dataclasses import dataclass
from functools import cached_property

from django_fdbqueue.exceptions import InvalidArgument, InvalidCursor, InvalidQueueName, InvalidPriority
from django_fdbqueue.fdbapi import fdb

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
RESERVED = ("l", "d", "x", "k", "w", "m")

SIZE = "size"
PUSHED = "pushed"
POPPED = "popped"

KINDS = ("fifo", "priority")
ENDS = ("min", "max")
NAME_MAX_LENGTH = 200
_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,%d}" % NAME_MAX_LENGTH)
PRIORITY_MIN = -(2**63)
PRIORITY_MAX = 2**63 - 1
_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]+")
# Tags inside the tokens: an item id can never be accepted as a cursor, or one kind of cursor as another.
_BROWSE_TAG = "b"
_LIST_TAG = "l"


# --- validation -----------------------------------------------------------------------------


def check_name(name: object) -> str:
    """Queue names are short, URL-safe and unambiguous: they appear in keys and in URLs."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        shown = name if isinstance(name, str) and len(name) <= 60 else None
        raise InvalidQueueName(
            "Queue names are 1 to 200 characters of letters, digits, '.', '_' and '-'"
            + (f"; got {shown!r}." if shown is not None else "."),
            name=shown,
        )
    return name


def check_prefix(prefix: object) -> str:
    """A listing prefix is the start of a possible name (or empty for all names)."""
    if not isinstance(prefix, str) or (prefix and not _NAME_RE.fullmatch(prefix)):
        raise InvalidQueueName(
            "prefix must be empty or the start of a queue name (letters, digits, '.', '_', '-')."
        )
    return prefix


def check_priority(priority: object) -> int:
    """A signed 64-bit integer: what FoundationDB's other bindings can read back without loss."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidPriority(
            f"A priority must be an integer, not {type(priority).__name__}.", priority=None
        )
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise InvalidPriority(
            "A priority must be between -2**63 and 2**63 - 1.", priority=str(priority)
        )
    return int(priority)


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise InvalidArgument(f"kind must be 'fifo' or 'priority', not {kind!r}.", kind=str(kind))
    return kind  # type: ignore[return-value]


def check_end(end: object) -> str:
    if end not in ENDS:
        raise InvalidArgument(f"end must be 'min' or 'max', not {end!r}.", end=str(end))
    return end  # type: ignore[return-value]


def check_count(value: object, what: str, *, minimum: int, maximum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer.")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise InvalidArgument(f"{what} must be at least {minimum}{upper}; got {value}.")
    return value


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
class QueueKeys:
    """The subspaces of one queue's data, addressed by its id (never its name).

    Because data hangs off an id chosen at creation, deleting a queue and creating another with
    the same name can never mix their items, even if a straggling writer raced the delete.
    """

    root: fdb.Subspace
    queue_id: bytes

    @cached_property
    def space(self) -> fdb.Subspace:
        return self.root[QUEUES][self.queue_id]

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
        return {which: self.counters.pack((which,)) for which in (SIZE, PUSHED, POPPED)}

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

    def item_prefix(self, priority: int, stamp: fdb.tuple.Versionstamp) -> bytes:
        """Every item key of (priority, stamp) starts with this; the rest is metadata."""
        return self.items.pack((priority, stamp))

    def priority_range(self, priority: int) -> slice:
        return self.items.range((priority,))


@functools.lru_cache(maxsize=4096)
def queue_keys(root: fdb.Subspace, queue_id: bytes) -> QueueKeys:
    """The (cached) subspaces of one queue: built once per queue, not once per operation."""
    return QueueKeys(root, queue_id)


# --- tokens ---------------------------------------------------------------------------------


def _encode_token(packed: bytes) -> str:
    return base64.urlsafe_b64encode(packed).rstrip(b"=").decode("ascii")


def _decode_token(token: object) -> tuple | None:
    """The tuple inside a token, or None when it is not a canonical token of ours."""
    if not isinstance(token, str) or len(token) > 2000 or not _TOKEN_RE.fullmatch(token):
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        if _encode_token(raw) != token:  # one spelling per token: ids are compared as strings
            return None
        return fdb.tuple.unpack(raw)
    except (binascii.Error, ValueError, TypeError, IndexError, KeyError, struct.error, RecursionError):
        return None


def _is_stamp(value: object) -> bool:
    return isinstance(value, fdb.tuple.Versionstamp) and value.is_complete()


def _is_priority(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and PRIORITY_MIN <= value <= PRIORITY_MAX


def item_id(priority: int, stamp: fdb.tuple.Versionstamp) -> str:
    """The opaque id of an item: its place in the queue, which never changes while it exists."""
    return _encode_token(fdb.tuple.pack((priority, stamp)))


def parse_item_id(token: object) -> tuple[int, fdb.tuple.Versionstamp]:
    parts = _decode_token(token)
    if parts is None or len(parts) != 2 or not _is_priority(parts[0]) or not _is_stamp(parts[1]):
        raise InvalidArgument("This is not an item id handed out by this service.", item_id=None)
    return parts[0], parts[1]


def browse_cursor(end: str, priority: int, stamp: fdb.tuple.Versionstamp) -> str:
    """Where the next page starts: just after this item, walking from ``end``."""
    return _encode_token(fdb.tuple.pack((_BROWSE_TAG, end, priority, stamp)))


def parse_browse_cursor(token: object, end: str) -> tuple[int, fdb.tuple.Versionstamp]:
    parts = _decode_token(token)
    if (
        parts is None
        or len(parts) != 4
        or parts[0] != _BROWSE_TAG
        or not _is_priority(parts[2])
        or not _is_stamp(parts[3])
    ):
        raise InvalidCursor()
    if parts[1] != end:
        raise InvalidCursor(
            f"This cursor continues a listing from the {parts[1]!r} end; pass end={parts[1]!r} "
            "or start again without a cursor."
        )
    return parts[2], parts[3]


def list_cursor(last_name: str) -> str:
    return _encode_token(fdb.tuple.pack((_LIST_TAG, last_name)))


def parse_list_cursor(token: object) -> str:
    parts = _decode_token(token)
    if (
        parts is None
        or len(parts) != 2
        or parts[0] != _LIST_TAG
        or not isinstance(parts[1], str)
        or not _NAME_RE.fullmatch(parts[1])
    ):
        raise InvalidCursor()
    return parts[1]

