"""What a pop took, kept raw on the calling thread, so it can be put back exactly (``giveback``).

The :class:`~records.Item` a pop returns has the value decoded and the key's other elements
(codec, dedup key, limit key, tenant) dropped. An async pop whose caller may go away runs inside
:func:`keeping`; the places that take items (``reading.take``, ``contention``) :func:`note` each
one, by id, and :func:`taken` finds the one that was returned.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from dataclasses import dataclass
from typing import Any, Iterator

from . import keys, tokens
from ..records import Item

Kept = dict[str, tuple[bytes, tuple[Any, ...], bytes]]
_local = threading.local()


@dataclass(frozen=True)
class Taken:
    """A popped item as it was stored: its queue's id, its key's elements, its payload."""

    item: Item
    queue_id: bytes
    elements: tuple[Any, ...]
    payload: bytes
    #: Names this item's put-back in its settled marker, the same on every retry.
    token: bytes = dataclasses.field(default_factory=lambda: os.urandom(keys.LEASE_TOKEN_BYTES))


@contextlib.contextmanager
def keeping() -> Iterator[Kept]:
    """Collect, by item id, what the pops run on this thread inside the block take."""
    kept: Kept = {}
    _local.kept = kept
    try:
        yield kept
    finally:
        _local.kept = None


def active() -> bool:
    """Whether a pop on this thread runs inside :func:`keeping` (so its takes are worth noting)."""
    return getattr(_local, "kept", None) is not None


def note(qk: keys.QueueKeys, elements: tuple[Any, ...] | list[Any], payload: Any) -> None:
    """A pop took the item at ``elements`` (priority, stamp, then its meta): keep it if asked."""
    kept = getattr(_local, "kept", None)
    if kept is not None:
        kept[tokens.item_id(elements[0], elements[1])] = (qk.queue_id, tuple(elements), bytes(payload))


def taken(item: Item | None, kept: Kept) -> Taken | None:
    """What ``item`` was, from what :func:`keeping` collected (None for no item)."""
    if item is None:
        return None
    queue_id, elements, payload = kept.get(item.id, (b"", (), b""))  # () : not noted, cannot go back
    return Taken(item, queue_id, elements, payload)
