"""Subcommands about queues as a whole: list, create, stats, clear, delete."""

from __future__ import annotations

from typing import Any

from django_fdbqueue import service
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service import QueueInfo

from . import confirm
from .arguments import add_paging, add_queue_name, add_yes, max_attempts
from .base import Context, add_subcommand
from .output import emit, fields, format_age, iso_utc, queue_data, table

__all__ = [
    "register",
    "attempts_text",
    "handle_list",
    "handle_create",
    "handle_stats",
    "handle_clear",
    "handle_delete",
]


def register(subparsers: Any) -> None:
    """Add list, create, stats, clear and delete to ``manage.py fdbqueue``."""
    parser = add_subcommand(subparsers, "list", handle_list, help="List queues with their statistics, by name.")
    parser.add_argument("--prefix", default="", help="Only queues whose name starts with this.")
    add_paging(parser, "queues")

    parser = add_subcommand(subparsers, "create", handle_create, help="Create an empty queue.")
    add_queue_name(parser)
    parser.add_argument(
        "--kind",
        choices=("fifo", "priority"),
        default="fifo",
        help="fifo (first in, first out) or priority (double-ended priority queue). Default: fifo.",
    )
    parser.add_argument(
        "--max-attempts",
        metavar="N",
        type=max_attempts,
        help=(
            "Claims an item may have (1 to 1000) before a failed or expired one goes to the dead letters. "
            "Default: none (no limit); change it later with set-max-attempts."
        ),
    )
    parser.add_argument(
        "--key-concurrency",
        metavar="N",
        type=int,
        help="At most N items pushed with the same --key leased at once (1 to 1,000,000). Default: no limit; "
        "change it later with set-key-limits.",
    )
    parser.add_argument(
        "--key-rate",
        metavar="R",
        type=float,
        help="At most R claims per second of items with the same --key (above 0; a token bucket of max(1, R) "
        "tokens). Default: no limit.",
    )
    parser.add_argument(
        "--tenants",
        action="store_true",
        help="Split the queue by tenant: every push names its --tenant, and pops and claims take from the "
        "tenants in turn. Fixed at creation.",
    )

    parser = add_subcommand(subparsers, "stats", handle_stats, help="Show one queue's statistics.")
    add_queue_name(parser)

    parser = add_subcommand(subparsers, "clear", handle_clear, help="Remove every item from a queue; the queue stays.")
    add_queue_name(parser)
    add_yes(parser, "removing the items")

    parser = add_subcommand(subparsers, "delete", handle_delete, help="Delete a queue and all its items.")
    add_queue_name(parser)
    add_yes(parser, "deleting")


def _priorities(info: QueueInfo) -> str:
    if info.min_priority is None:
        return "-"
    if info.min_priority == info.max_priority:
        return str(info.min_priority)
    return f"{info.min_priority} .. {info.max_priority}"


def _queues_table(queues: list[QueueInfo], next_cursor: str | None) -> str:
    if not queues:
        text = "No queues."
    else:
        rows = [
            (
                q.name,
                q.kind,
                q.size,
                q.leased,
                q.delayed,
                q.dead,
                "-" if q.min_priority is None else q.min_priority,
                "-" if q.max_priority is None else q.max_priority,
                format_age(q.oldest_age_seconds),
                q.pushed,
                q.popped,
            )
            for q in queues
        ]
        headers = ("NAME", "KIND", "SIZE", "LEASED", "DELAYED", "DEAD", "MIN", "MAX", "OLDEST", "PUSHED", "POPPED")
        text = table(headers, rows, right=set(range(2, len(headers))))
    if next_cursor is not None:
        text += f"\nMore queues: add --cursor {next_cursor}"
    return text


def handle_list(ctx: Context, options: dict[str, Any]) -> None:
    """One page of queues; the cursor for the next page is printed (or is ``next_cursor``)."""
    page = service.list_queues(
        ctx.database(), prefix=options["prefix"], cursor=options["cursor"], limit=options["limit"]
    )
    data = {"queues": [queue_data(q) for q in page.items], "next_cursor": page.next_cursor}
    emit(ctx, data, lambda: _queues_table(page.items, page.next_cursor))


def handle_create(ctx: Context, options: dict[str, Any]) -> None:
    """Create the queue; an existing name is refused (exit 2), never overwritten."""
    info = service.create_queue(
        ctx.database(),
        options["name"],
        kind=options["kind"],
        max_attempts=options["max_attempts"],
        key_concurrency=options.get("key_concurrency"),
        key_rate=options.get("key_rate"),
        tenants=bool(options.get("tenants")),
    )
    limit = "" if info.max_attempts is None else f", at most {_claims(info.max_attempts)} per item"
    emit(ctx, queue_data(info), f"Created {info.kind} queue {info.name!r}{limit}.", success=True)


def _claims(count: int) -> str:
    return "1 claim" if count == 1 else f"{count} claims"


def attempts_text(max_attempts: int | None) -> str:
    """The queue's attempt limit in words, for stats and set-max-attempts."""
    return "unlimited" if max_attempts is None else f"at most {_claims(max_attempts)} per item"


def key_limits_text(concurrency: int | None, rate: float | None) -> str:
    """A queue's per-key limits in words, for stats and set-key-limits."""
    parts = []
    if concurrency is not None:
        parts.append(f"{concurrency} leased at once")
    if rate is not None:
        parts.append(f"{rate:g} claims per second")
    return "none" if not parts else ", ".join(parts) + " per key"


def _stats_text(info: QueueInfo) -> str:
    oldest = iso_utc(info.oldest_enqueued_at)
    if oldest is not None:
        oldest += f" ({format_age(info.oldest_age_seconds)} ago)"
    return fields(
        [
            ("Queue", info.name),
            ("Kind", info.kind),
            ("Size", info.size),
            ("Leased", info.leased),
            ("Delayed", info.delayed),
            ("Dead", info.dead),
            ("Attempts", attempts_text(info.max_attempts)),
            ("Key limits", key_limits_text(info.key_concurrency, info.key_rate)),
            *([("Tenants", f"{info.tenants} with ready items")] if info.tenants is not None else []),
            ("Priorities", _priorities(info)),
            ("Oldest item", oldest),
            ("Pushed", info.pushed),
            ("Popped", info.popped),
            ("Created", iso_utc(info.created_at)),
        ]
    )


def handle_stats(ctx: Context, options: dict[str, Any]) -> None:
    """The queue's kind and statistics (constant time, however long the queue)."""
    info = service.get_queue(ctx.database(), options["name"])
    emit(ctx, queue_data(info), lambda: _stats_text(info))


@transactional
def _clear_counting(tr: Any, name: str) -> int:
    # The count and the clear in one transaction: the number reported is what went (short of a
    # retry after an unknown commit result, where the earlier attempt had already cleared).
    size = service.size(tr, name)
    service.clear(tr, name)
    return size


def _items(count: int) -> str:
    return "1 item" if count == 1 else f"{count} items"


def handle_clear(ctx: Context, options: dict[str, Any]) -> None:
    """Remove every item after confirmation (y/N), or at once with --yes."""
    name = options["name"]
    action = f"clear queue {name!r}"
    if not options["yes"]:
        confirm.ensure_can_ask(ctx, action)
        size = service.size(ctx.database(), name)
        confirm.ask(ctx, f"Remove all {_items(size)} from queue {name!r}?", action)
    removed = _clear_counting(ctx.database(), name)
    emit(ctx, {"name": name, "removed": removed}, f"Removed {_items(removed)} from queue {name!r}.", success=True)


def handle_delete(ctx: Context, options: dict[str, Any]) -> None:
    """Delete the queue after the person types its name, or at once with --yes."""
    name = options["name"]
    action = f"delete queue {name!r}"
    if not options["yes"]:
        confirm.ensure_can_ask(ctx, action)
        size = service.size(ctx.database(), name)
        confirm.ask(
            ctx,
            f"Delete queue {name!r} and its {_items(size)}? This cannot be undone. Type the queue name to confirm:",
            action,
            expect=name,
        )
    # Given the database, the service runs the delete in a transaction of its own, which is what
    # lets it recognise its own earlier attempt when a commit's result was unknown.
    service.delete_queue(ctx.database(), name)
    emit(ctx, {"name": name, "deleted": True}, f"Deleted queue {name!r}.", success=True)
