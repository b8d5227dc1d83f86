"""Subcommands for reliable consumption by hand: claim, ack, release, extend, and the dead letters.

These are what a worker does, one step at a time, for scripts in other languages and for looking
into a stuck queue: ``claim`` prints a receipt, and ``ack``, ``release`` or ``extend`` take it.
A receipt names its queue, so giving the wrong QUEUE is refused rather than acting elsewhere.
"""

from __future__ import annotations

import argparse
from typing import Any

from django_fdbqueue import service

from . import confirm
from .arguments import add_end, add_paging, add_queue_name, add_wait, add_yes, max_attempts, positive_seconds, seconds
from .base import Context, add_subcommand
from .errors import nothing_there, usage_error
from .output import (
    dead_letter_data,
    dead_letters_table,
    emit,
    item_data,
    items_table,
    lease_data,
    fields,
    lease_text,
    page_text,
    queue_data,
)
from .queues import attempts_text, key_limits_text

__all__ = [
    "register",
    "handle_claim",
    "handle_ack",
    "handle_release",
    "handle_extend",
    "handle_dead_letters",
    "handle_requeue",
    "handle_delete_dead_letter",
    "handle_set_max_attempts",
    "handle_set_key_limits",
    "handle_key_limits",
]

DEFAULT_LEASE = 30.0


def _add_receipt(parser: Any) -> None:
    parser.add_argument("receipt", help="The receipt that claim printed.")


def _add_lease(parser: Any, help: str, default: float | None = None) -> None:
    """--lease S: seconds from now until the lease ends, for claim and extend alike."""
    parser.add_argument("--lease", metavar="S", type=positive_seconds, default=default, help=help)


def register(subparsers: Any) -> None:
    """Add claim, ack, release, extend, dead-letters, requeue, delete-dead-letter, set-max-attempts,
    set-key-limits and key-limits."""
    _register_lease_commands(subparsers)
    _register_dead_letter_commands(subparsers)
    _register_key_limit_commands(subparsers)


def _limit(kind: Any) -> Any:
    """argparse type: a number, or ``none`` to remove the limit (the service checks the range)."""

    def parse(text: str) -> Any:
        if text.strip().lower() in ("none", "unlimited"):
            return None
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'none', got {text!r}") from None

    return parse


def _register_key_limit_commands(subparsers: Any) -> None:
    """set-key-limits and key-limits: per-key concurrency and rate limits."""
    parser = add_subcommand(
        subparsers,
        "set-key-limits",
        handle_set_key_limits,
        help="Set how many items of one key may be leased at once, and claimed per second.",
    )
    add_queue_name(parser)
    parser.add_argument(
        "--concurrency",
        metavar="N",
        type=_limit(int),
        default=_LEAVE,
        help="1 to 1,000,000 leases at once per key, or 'none' for no limit. Left out: unchanged.",
    )
    parser.add_argument(
        "--rate",
        metavar="R",
        type=_limit(float),
        default=_LEAVE,
        help="Claims per second per key (above 0), or 'none' for no limit. Left out: unchanged.",
    )
    parser = add_subcommand(
        subparsers,
        "key-limits",
        handle_key_limits,
        help="Show a queue's per-key limits, the keys holding the most leases, and those at the limit.",
    )
    add_queue_name(parser)
    parser.add_argument("--top", metavar="N", type=int, default=20, help="Keys shown (1 to 500). Default: 20.")


_LEAVE = object()


def handle_set_key_limits(ctx: Context, options: dict[str, Any]) -> None:
    """Change the queue's per-key limits; prints the queue (its JSON has ``key_concurrency``, ``key_rate``)."""
    changes = {k: options[k] for k in ("concurrency", "rate") if options[k] is not _LEAVE}
    info = service.set_key_limits(ctx.database(), options["name"], **changes)
    text = f"Queue {info.name!r}: key limits {key_limits_text(info.key_concurrency, info.key_rate)}."
    emit(ctx, queue_data(info), text, success=True)


def handle_key_limits(ctx: Context, options: dict[str, Any]) -> None:
    """The queue's per-key limits and where its keys stand."""
    state = service.key_limit_state(ctx.database(), options["name"], top=options["top"])
    data = {
        "name": state.name,
        "concurrency": state.concurrency,
        "rate": state.rate,
        "keys_leased": state.keys_leased,
        "leased": [{"key": key, "leased": count} for key, count in state.leased],
        "at_limit": list(state.at_limit),
    }

    def text() -> str:
        lines = [
            fields(
                [
                    ("Queue", state.name),
                    ("Key limits", key_limits_text(state.concurrency, state.rate)),
                    ("Keys leased", state.keys_leased),
                    ("At the limit", ", ".join(state.at_limit) or None),
                ]
            )
        ]
        lines += [f"  {count:>6}  {key}" for key, count in state.leased]
        return "\n".join(lines)

    emit(ctx, data, text)


def _register_lease_commands(subparsers: Any) -> None:
    """claim, and what a receipt lets one do: ack, release, extend."""
    parser = add_subcommand(
        subparsers,
        "claim",
        handle_claim,
        help="Take the next item on a lease, hidden from others until acked, released or the lease ends.",
        description=(
            "Take the next item on a lease and print it with its receipt. The item stays in the store,\n"
            "hidden from other consumers; ack it when done, release it to give it back, extend the lease\n"
            "to keep it longer. If none of that happens before the lease ends, the item comes back by\n"
            "itself (or goes to the dead letters after the queue's max attempts). Exit code 1 when no\n"
            "item came."
        ),
    )
    add_queue_name(parser)
    _add_lease(
        parser, f"How long the item stays yours, in seconds (at most 43200). Default: {DEFAULT_LEASE:g}.", DEFAULT_LEASE
    )
    add_wait(parser, "to claim")
    add_end(parser)

    parser = add_subcommand(subparsers, "ack", handle_ack, help="Acknowledge a claimed item: it is removed for good.")
    add_queue_name(parser)
    _add_receipt(parser)

    parser = add_subcommand(
        subparsers, "release", handle_release, help="Give a claimed item back, now or after --delay seconds."
    )
    add_queue_name(parser)
    _add_receipt(parser)
    parser.add_argument(
        "--delay",
        metavar="S",
        type=seconds,
        default=0.0,
        help="Keep it hidden this many seconds more before others can claim it. Default: 0.",
    )

    parser = add_subcommand(
        subparsers, "extend", handle_extend, help="Make a lease end --lease S seconds from now (the receipt stays)."
    )
    add_queue_name(parser)
    _add_receipt(parser)
    _add_lease(parser, "The lease now ends S seconds from now (at most 43200), as claim's --lease. Required.")
    parser.add_argument(
        "seconds",
        metavar="SECONDS",
        nargs="?",
        type=positive_seconds,
        help="Deprecated: the same as --lease, the way extend took it before. Give one of them, not both.",
    )


def _register_dead_letter_commands(subparsers: Any) -> None:
    """dead-letters, requeue, delete-dead-letter, and set-max-attempts that decides when items die."""
    parser = add_subcommand(
        subparsers,
        "dead-letters",
        handle_dead_letters,
        help="Page through the items that ran out of attempts, in queue order.",
    )
    add_queue_name(parser)
    add_paging(parser, "dead letters")

    parser = add_subcommand(
        subparsers,
        "requeue",
        handle_requeue,
        help="Put a dead letter back in the queue, at its old place, with its attempts reset.",
    )
    add_queue_name(parser)
    parser.add_argument("item_id", metavar="ITEM_ID", help="The dead letter's id, as dead-letters shows it.")

    parser = add_subcommand(
        subparsers, "delete-dead-letter", handle_delete_dead_letter, help="Delete one dead letter for good."
    )
    add_queue_name(parser)
    parser.add_argument("item_id", metavar="ITEM_ID", help="The dead letter's id, as dead-letters shows it.")
    add_yes(parser, "deleting")

    parser = add_subcommand(
        subparsers,
        "set-max-attempts",
        handle_set_max_attempts,
        help="Set how many claims an item may have before it goes to the dead letters.",
    )
    add_queue_name(parser)
    parser.add_argument(
        "max_attempts",
        metavar="N",
        type=max_attempts,
        help="1 to 1000, or 'none' for no limit. Items already over a new limit die at their next failure.",
    )


def handle_claim(ctx: Context, options: dict[str, Any]) -> None:
    """Claim one item; exit 1 when none was visible (after --wait)."""
    name = options["name"]
    lease = service.claim(ctx.database(), name, lease=options["lease"], end=options["end"], wait=options["wait"])
    if lease is None:
        waited = "" if options["wait"] is None else f" (waited {options['wait']:g}s)"
        raise nothing_there(f"Queue {name!r} has no item to claim{waited}.")
    emit(ctx, lease_data(lease), lambda: lease_text(lease))


def handle_ack(ctx: Context, options: dict[str, Any]) -> None:
    """Acknowledge: the leased item is deleted. A lease that is over is exit 2, with why."""
    name, receipt = options["name"], options["receipt"]
    service.ack(ctx.database(), receipt, name=name)
    emit(ctx, {"name": name, "acked": True}, f"Acknowledged: the item is removed from queue {name!r}.", success=True)


_RELEASED = {
    "ready": "Released: the item is back in queue {name!r}.",
    "delayed": "Released: the item is back in queue {name!r} in {delay:g}s.",
    "dead": "Released: the item had used all its attempts and is now a dead letter of queue {name!r}.",
}


def handle_release(ctx: Context, options: dict[str, Any]) -> None:
    """Give the item back (after --delay); says where it went: ready, delayed or dead."""
    name, receipt, delay = options["name"], options["receipt"], options["delay"]
    state = service.release(ctx.database(), receipt, delay=delay, name=name)
    text = _RELEASED.get(state, "Released: the item is now {state} in queue {name!r}.")
    emit(ctx, {"name": name, "state": state}, text.format(name=name, delay=delay, state=state), success=True)


def handle_extend(ctx: Context, options: dict[str, Any]) -> None:
    """Move the lease's end to --lease seconds from now; prints the lease like claim."""
    seconds = _extend_lease(options["lease"], options["seconds"])
    lease = service.extend(ctx.database(), options["receipt"], seconds, name=options["name"])
    emit(ctx, lease_data(lease), lambda: lease_text(lease))


def _extend_lease(lease: float | None, seconds: float | None) -> float:
    """extend's new length: --lease, or the positional SECONDS it replaced (one of them)."""
    if lease is not None and seconds is not None:
        raise usage_error("Give --lease S or SECONDS (its old spelling), not both.")
    if lease is None and seconds is None:
        raise usage_error("Give --lease S: the seconds from now until the lease ends.")
    return lease if lease is not None else seconds  # type: ignore[return-value]


def handle_dead_letters(ctx: Context, options: dict[str, Any]) -> None:
    """One page of dead letters; an empty page is not an error (exit 0), as with browse."""
    page = service.dead_letters(ctx.database(), options["name"], cursor=options["cursor"], limit=options["limit"])
    data = {"dead_letters": [dead_letter_data(letter) for letter in page.items], "next_cursor": page.next_cursor}
    emit(ctx, data, lambda: page_text(dead_letters_table(page.items), page.next_cursor))


def handle_requeue(ctx: Context, options: dict[str, Any]) -> None:
    """Back to ready, at its old place in queue order; an unknown id is exit 2."""
    name = options["name"]
    item = service.requeue_dead_letter(ctx.database(), name, options["item_id"])
    emit(
        ctx,
        item_data(item),
        lambda: items_table([item]) + f"\nRequeued to queue {name!r}; its attempts start over.",
    )


def handle_delete_dead_letter(ctx: Context, options: dict[str, Any]) -> None:
    """Delete one dead letter after confirmation (y/N), or at once with --yes."""
    name, item_id = options["name"], options["item_id"]
    action = f"delete dead letter {item_id!r}"
    if not options["yes"]:
        confirm.ensure_can_ask(ctx, action)
        service.get_queue(ctx.database(), name)  # an unknown queue fails before the question
        confirm.ask(ctx, f"Delete dead letter {item_id} of queue {name!r}? It cannot be recovered.", action)
    service.delete_dead_letter(ctx.database(), name, item_id)
    data = {"name": name, "id": item_id, "deleted": True}
    emit(ctx, data, f"Deleted dead letter {item_id} of queue {name!r}.", success=True)


def handle_set_max_attempts(ctx: Context, options: dict[str, Any]) -> None:
    """Change the queue's attempt limit; prints the queue (its JSON has ``max_attempts``)."""
    info = service.set_max_attempts(ctx.database(), options["name"], options["max_attempts"])
    if info.max_attempts is None:
        text = f"Queue {info.name!r}: no limit on attempts: failed items are retried until acknowledged."
    else:
        text = f"Queue {info.name!r}: {attempts_text(info.max_attempts)}, then to the dead letters."
    emit(ctx, queue_data(info), text, success=True)
