"""How results look: plain tables for people, JSON for programs, the same data behind both.

Values are always shown as compact JSON (so a value never spans lines and control characters are
escaped), and times as ISO 8601 in UTC with a ``Z``, as the REST API shows them.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any, Callable, Iterable, Sequence

from django_fdbqueue.service import DeadLetter, Item, Lease, QueueInfo

from .base import Context

__all__ = [
    "compact_json",
    "iso_utc",
    "format_age",
    "item_data",
    "pushed_item_data",
    "queue_data",
    "lease_data",
    "lease_text",
    "dead_letter_data",
    "dead_letters_table",
    "table",
    "fields",
    "items_table",
    "page_text",
    "emit",
]


def _jsonable(value: Any) -> Any:
    # Values pushed as bytes from Python have no JSON form; show them the way the REST API does.
    # Anything else a custom codec produced is shown by its repr: a popped item must never be
    # lost to a formatting error.
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
    return {"$repr": repr(value)}


def compact_json(data: Any) -> str:
    """One line of JSON, without spaces, non-ASCII text kept readable."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_jsonable)


def iso_utc(moment: dt.datetime | None) -> str | None:
    """``2026-11-21T13:10:21.213259Z``; None stays None."""
    if moment is None:
        return None
    return moment.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def format_age(seconds: float | None) -> str:
    """A short age for tables: ``4.2s``, ``5m07s``, ``3h05m``, ``2d04h``; ``-`` when there is none."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def item_data(item: Item) -> dict[str, Any]:
    """An item as JSON data: the same fields, under the same names, as the REST API's item."""
    value = item.value
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = _jsonable(value)
    return {
        "id": item.id,
        "priority": item.priority,
        "value": value,
        "enqueued_at": iso_utc(item.enqueued_at),
        "attempts": item.attempts,
    }


def pushed_item_data(item: Item) -> dict[str, Any]:
    """What a push stored, as the REST API's push answers it: the item and whether it was a duplicate."""
    return {**item_data(item), "duplicate": item.duplicate}


def queue_data(info: QueueInfo) -> dict[str, Any]:
    """A queue's description and statistics as JSON data (nulls while it is empty)."""
    age = info.oldest_age_seconds
    return {
        "name": info.name,
        "kind": info.kind,
        "size": info.size,
        "pushed": info.pushed,
        "popped": info.popped,
        "min_priority": info.min_priority,
        "max_priority": info.max_priority,
        "oldest_enqueued_at": iso_utc(info.oldest_enqueued_at),
        "oldest_age_seconds": None if age is None else round(age, 6),
        "created_at": iso_utc(info.created_at),
        "leased": info.leased,
        "delayed": info.delayed,
        "dead": info.dead,
        "max_attempts": info.max_attempts,
        "key_concurrency": info.key_concurrency,
        "key_rate": info.key_rate,
        **({"tenants": info.tenants} if info.tenants is not None else {}),
    }


def lease_data(lease: Lease) -> dict[str, Any]:
    """A lease as JSON data: the receipt to ack, release or extend with, when it ends, the item."""
    return {
        "receipt": lease.receipt,
        "lease_expires_at": iso_utc(lease.lease_expires_at),
        "item": item_data(lease.item),
    }


def lease_text(lease: Lease) -> str:
    """A lease for people: one field per line, the receipt first (it is what the next command needs)."""
    item = lease.item
    return fields(
        [
            ("Receipt", lease.receipt),
            ("Lease expires at", iso_utc(lease.lease_expires_at)),
            ("ID", item.id),
            ("Priority", item.priority),
            ("Attempts", item.attempts),
            ("Enqueued at", iso_utc(item.enqueued_at)),
            ("Value", compact_json(item_data(item)["value"])),
        ]
    )


def dead_letter_data(letter: DeadLetter) -> dict[str, Any]:
    """A dead letter as JSON data: the item, how many claims it had, and when it died."""
    return {**item_data(letter.item), "died_at": iso_utc(letter.died_at)}


def dead_letters_table(letters: Sequence[DeadLetter]) -> str:
    """Dead letters in queue order, value last and in full."""
    if not letters:
        return "No dead letters."
    rows = [
        (
            letter.item.id,
            letter.item.priority,
            letter.item.attempts,
            iso_utc(letter.died_at),
            compact_json(item_data(letter.item)["value"]),
        )
        for letter in letters
    ]
    return table(("ID", "PRIORITY", "ATTEMPTS", "DIED AT", "VALUE"), rows, right={1, 2})


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, right: Iterable[int] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart; ``right`` lists right-aligned columns.

    The last column is not padded, so lines carry no trailing spaces and a long value in it does
    not widen the others.
    """
    cells = [[str(cell) for cell in row] for row in rows]
    right_aligned = set(right)
    widths = [len(header) for header in headers]
    for row in cells:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))
    last = len(headers) - 1

    def line(row: Sequence[str]) -> str:
        parts = []
        for index, cell in enumerate(row):
            if index == last:
                parts.append(cell.rjust(widths[index]) if index in right_aligned else cell)
            elif index in right_aligned:
                parts.append(cell.rjust(widths[index]))
            else:
                parts.append(cell.ljust(widths[index]))
        return "  ".join(parts).rstrip()

    return "\n".join([line(list(headers)), *(line(row) for row in cells)])


def fields(pairs: Iterable[tuple[str, Any]]) -> str:
    """One ``label  value`` line per pair, values aligned: a single record, read top to bottom."""
    pairs = [(label, "-" if value is None else str(value)) for label, value in pairs]
    width = max((len(label) for label, _ in pairs), default=0)
    return "\n".join(f"{label.ljust(width)}  {value}".rstrip() for label, value in pairs)


def items_table(items: Sequence[Item]) -> str:
    """Items in the order given, one per line, value last and in full."""
    if not items:
        return "No items."
    rows = [
        (item.id, item.priority, iso_utc(item.enqueued_at), compact_json(item_data(item)["value"])) for item in items
    ]
    return table(("ID", "PRIORITY", "ENQUEUED AT", "VALUE"), rows, right={1})


def page_text(rows_table: str, next_cursor: str | None) -> str:
    """A page of a listing for people: its table, then how to ask for the next page, if any."""
    if next_cursor is None:
        return rows_table
    return f"{rows_table}\nNext page: add --cursor {next_cursor}"


def emit(ctx: Context, data: Any, text: str | Callable[[], str], *, success: bool = False) -> None:
    """Write ``data`` as JSON with ``--json``, otherwise ``text`` (or what it returns).

    ``success`` styles the text as a confirmation of a change (green on a colour terminal).
    """
    if ctx.as_json:
        ctx.stdout.write(compact_json(data))
        return
    rendered = text() if callable(text) else text
    ctx.stdout.write(rendered, style_func=ctx.style.SUCCESS if success else None)
