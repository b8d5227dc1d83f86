"""The opaque tokens the service hands out (item ids, cursors, receipts): tuples of key parts,
packed and base64-encoded, checked on the way back in."""

from __future__ import annotations

import base64
import binascii
import re
import struct
from dataclasses import dataclass
from typing import Any

from django_fdbqueue.exceptions import InvalidArgument, InvalidCursor
from django_fdbqueue.fdbapi import fdb, tuples

from .checks import NAME_RE, PRIORITY_MAX, PRIORITY_MIN
from .keys import LEASE_TOKEN_BYTES

_TOKEN_RE = re.compile(r"[A-Za-z0-9_-]+")
_BROWSE_TAG = "b"
_LIST_TAG = "l"
_RECEIPT_TAG = "r"
_SCHEDULE_TAG = "s"
_DEAD_TAG = "x"


def _encode_token(packed: bytes) -> str:
    return base64.urlsafe_b64encode(packed).rstrip(b"=").decode("ascii")


def _decode_token(token: object) -> tuple[Any, ...] | None:
    """The tuple inside a token, or None when it is not a canonical token of ours."""
    if not isinstance(token, str) or len(token) > 2000 or not _TOKEN_RE.fullmatch(token):
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        if _encode_token(raw) != token:  # one spelling per token: ids are compared as strings
            return None
        parts = fdb.tuple.unpack(raw)
        # One encoding per tuple too: the tuple layer reads an unterminated last element (bytes,
        # text) up to the end, so a token cut short by a character could decode to the same tuple.
        return parts if tuples.pack(parts) == raw else None
    except (binascii.Error, ValueError, TypeError, IndexError, KeyError, struct.error, RecursionError):
        return None


def _is_stamp(value: object) -> bool:
    return isinstance(value, fdb.tuple.Versionstamp) and value.is_complete()


def _is_priority(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and PRIORITY_MIN <= value <= PRIORITY_MAX


def item_id(priority: int, stamp: fdb.tuple.Versionstamp) -> str:
    """The opaque id of an item: its place in the queue, which never changes while it exists."""
    return _encode_token(tuples.pack((priority, stamp)))


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
    """The cursor of a queue list that ended at ``last_name`` (what ``list_queues`` hands out)."""
    return _encode_token(fdb.tuple.pack((_LIST_TAG, last_name)))


def parse_list_cursor(token: object) -> str:
    parts = _decode_token(token)
    if (
        parts is None
        or len(parts) != 2
        or parts[0] != _LIST_TAG
        or not isinstance(parts[1], str)
        or not NAME_RE.fullmatch(parts[1])
    ):
        raise InvalidCursor()
    return parts[1]


#: Receipts this process handed out lately, read back without decoding them again (an ack in the
#: process that claimed: a worker's). At most this many are kept; then they start over.
RECEIPTS_KEPT = 1024
_handed_out: dict[str, "Receipt"] = {}


@dataclass(frozen=True)
class Receipt:
    """What a claim hands out: where the leased item is, and the lease's secret token."""

    name: str
    queue_id: bytes
    priority: int
    stamp: fdb.tuple.Versionstamp
    token: bytes

    def encode(self) -> str:
        return _encode_token(
            tuples.pack((_RECEIPT_TAG, self.name, self.queue_id, self.priority, self.stamp, self.token))
        )

    def hand_out(self) -> str:
        """:meth:`encode`, remembered: :func:`parse_receipt` knows what it reads back."""
        text = self.encode()
        if len(_handed_out) >= RECEIPTS_KEPT:
            _handed_out.clear()
        _handed_out[text] = self
        return text


def parse_receipt(token: object) -> Receipt:
    """A claim's receipt read back (where its item is, and the lease's token); InvalidReceipt if
    it is not one this service handed out."""
    from django_fdbqueue.exceptions import InvalidReceipt

    known = _handed_out.get(token) if type(token) is str else None
    if known is not None:  # made here from a claim's own parts, so it is one (see hand_out)
        return known
    parts = _decode_token(token)
    if (
        parts is None
        or len(parts) != 6
        or parts[0] != _RECEIPT_TAG
        or not isinstance(parts[1], str)
        or not NAME_RE.fullmatch(parts[1])
        or not isinstance(parts[2], bytes)
        or not _is_priority(parts[3])
        or not _is_stamp(parts[4])
        or not isinstance(parts[5], bytes)
        or len(parts[5]) != LEASE_TOKEN_BYTES
    ):
        raise InvalidReceipt()
    return Receipt(*parts[1:])


def position_cursor(tag: str, *position: Any) -> str:
    """A cursor for the scheduled and dead-letter listings: the last position shown."""
    return _encode_token(fdb.tuple.pack((tag, *position)))


def parse_position_cursor(token: object, tag: str, length: int) -> tuple[Any, ...]:
    """The position in a scheduled (visible_at, priority, vs, token) or dead-letter (priority, vs) cursor."""
    parts = _decode_token(token)
    if parts is None or len(parts) != length + 1 or parts[0] != tag:
        raise InvalidCursor()
    position = tuple(parts[1:])
    if tag == _SCHEDULE_TAG:
        ok = (
            _is_priority(position[0])
            and _is_priority(position[1])
            and _is_stamp(position[2])
            and isinstance(position[3], bytes)
        )
    else:
        ok = _is_priority(position[0]) and _is_stamp(position[1])
    if not ok:
        raise InvalidCursor()
    return position


SCHEDULE_CURSOR = _SCHEDULE_TAG
DEAD_CURSOR = _DEAD_TAG
