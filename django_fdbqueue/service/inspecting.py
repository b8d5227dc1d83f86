"""Public read-only views of what a queue holds: ``browse``, ``get_item`` and ``scheduled``.

Nothing here removes or moves an item. Pages end in opaque cursors (``keys``) that hold a
position, so they stay valid while the items they passed are popped.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import DatabaseOrTransaction, transactional

from ._internals import catalog, checks, reading, tokens, visibility
from .observe import observed
from .records import LIMIT_MAX, Item, Page, ScheduledItem


@observed
def browse(
    db_or_tr: DatabaseOrTransaction, name: str, *, end: str = "min", cursor: str | None = None, limit: int = 50
) -> Page[Item]:
    """A page of items in the order they would be popped from ``end``; nothing is removed."""
    checks.check_name(name)
    checks.check_end(end)
    limit = checks.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = tokens.parse_browse_cursor(cursor, end) if cursor is not None else None
    return reading.browse_page(db_or_tr, name, end, after, limit)


@observed(none_is_empty=True)
def get_item(db_or_tr: DatabaseOrTransaction, name: str, item_id: str) -> Item | None:
    """The item with this id if it is still queued (None once popped or cleared)."""
    checks.check_name(name)
    priority, stamp = tokens.parse_item_id(item_id)
    return reading.get_item(db_or_tr, name, priority, stamp)


@transactional
def _scheduled(tr: Any, name: str, after: tuple[Any, ...] | None, limit: int) -> Page[ScheduledItem]:
    _entry, qk = catalog.require(tr, name)
    rows, last = visibility.scheduled_page(tr, qk, after, limit)
    cursor = None if last is None else tokens.position_cursor(tokens.SCHEDULE_CURSOR, *last)
    return Page(rows, cursor)


@observed
def scheduled(
    db_or_tr: DatabaseOrTransaction, name: str, *, cursor: str | None = None, limit: int = 50
) -> Page[ScheduledItem]:
    """Leased and delayed items, in the order they become visible."""
    checks.check_name(name)
    limit = checks.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = None if cursor is None else tokens.parse_position_cursor(cursor, tokens.SCHEDULE_CURSOR, 4)
    return _scheduled(db_or_tr, name, after, limit)
