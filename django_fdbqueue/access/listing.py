"""The queue list of the faces (REST and the admin): the queues a user may view, a page at a time,
with cursors that never name a queue the user may not view.

A user who may view every queue pages through the catalog as the service does. Anyone else gets
pages filled from up to :data:`LIST_READS` catalog pages, so a few viewable queues among many do
not come as pages of nothing. A full page's cursor is the last queue it shows, which the user may
view. A page cut short by the reads continues after the last queue *read*, which may be hidden:
that cursor is sealed (encrypted and authenticated with the project's ``SECRET_KEY``), so it
tells nothing but "more to read". The service's own cursors stay plain; only this face seals.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Any, Callable

from django.utils.crypto import constant_time_compare, salted_hmac

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidCursor
from django_fdbqueue.service.extension import list_cursor
from django_fdbqueue.service.records import Page

__all__ = ["LIST_READS", "LIST_READ_SIZE", "seal", "unseal", "visible_page"]

#: Most catalog pages one page of the list reads to fill up with queues the user may view, and the
#: fewest queues a read holds: up to 1,000 queues looked at for one page.
LIST_READS = 10
LIST_READ_SIZE = 100

_SALT = "django_fdbqueue.access.listing"
#: The first byte of a sealed cursor's bytes; a plain list cursor's (a packed tuple) is 0x02.
_SEALED = b"\xfe"
_NONCE_BYTES = 16
_MAC_BYTES = 16


def _keystream(nonce: bytes, length: int) -> bytes:
    """HMAC-SHA256 of the nonce and a counter, keyed by the project's key: a stream to XOR with."""
    blocks, counter = b"", 0
    while len(blocks) < length:
        block = nonce + counter.to_bytes(4, "big")
        blocks += salted_hmac(_SALT + ".stream", block, algorithm="sha256").digest()
        counter += 1
    return blocks[:length]


def _mac(body: bytes) -> bytes:
    return salted_hmac(_SALT + ".mac", body, algorithm="sha256").digest()[:_MAC_BYTES]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def seal(cursor: str) -> str:
    """An opaque cursor holding ``cursor``: URL-safe base64, like every cursor, unreadable without
    the project's key, and refused (``InvalidCursor``) once altered."""
    data = cursor.encode("ascii")
    nonce = os.urandom(_NONCE_BYTES)
    body = _SEALED + nonce + bytes(a ^ b for a, b in zip(data, _keystream(nonce, len(data))))
    return _b64(body + _mac(body))


def unseal(cursor: str | None) -> str | None:
    """The cursor inside a sealed one; any other cursor as given (the service checks it)."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        return cursor
    if not raw.startswith(_SEALED):
        return cursor
    body, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
    if len(body) <= len(_SEALED) + _NONCE_BYTES or not constant_time_compare(mac, _mac(body)):
        raise InvalidCursor()
    nonce, data = body[1 : 1 + _NONCE_BYTES], body[1 + _NONCE_BYTES :]
    try:
        return bytes(a ^ b for a, b in zip(data, _keystream(nonce, len(data)))).decode("ascii")
    except UnicodeDecodeError:
        raise InvalidCursor() from None


def visible_page(
    db: Any, prefix: str, cursor: str | None, limit: int, *, sees_all: bool, may_view: Callable[[str], bool]
) -> Page[Any]:
    """A page of up to ``limit`` queues that ``may_view`` lets through (see the module docstring).

    ``sees_all``: the user may view every queue, so the catalog's own pages are the list's.
    """
    cursor = unseal(cursor)
    if sees_all:
        return service.list_queues(db, prefix=prefix, cursor=cursor, limit=limit)
    shown: list[Any] = []
    for _ in range(LIST_READS):
        page = service.list_queues(db, prefix=prefix, cursor=cursor, limit=max(limit, LIST_READ_SIZE))
        shown += [info for info in page.items if may_view(info.name)]
        cursor = page.next_cursor
        if cursor is None or len(shown) >= limit:
            break
    if len(shown) >= limit:
        # Full: the next page starts after the last queue shown (a name the user may view).
        more = len(shown) > limit or cursor is not None
        shown = shown[:limit]
        return Page(shown, list_cursor(shown[-1].name) if more else None)
    return Page(shown, seal(cursor) if cursor is not None else None)
