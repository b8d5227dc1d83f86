"""Subcommands about a queue's items: push, pop, peek, browse.

Values cross the command line as JSON: one value as an argument, or one value per line from a
file or standard input. The priority is an option, so a line is nothing but its value.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, cast

from django_fdbqueue import service

from .arguments import add_end, add_paging, add_queue_name, add_wait, moment, positive_int, seconds
from .base import Context, add_subcommand
from .errors import nothing_there, usage_error
from .output import emit, item_data, items_table, page_text, pushed_item_data

__all__ = ["register", "parse_value", "handle_push", "handle_pop", "handle_peek", "handle_browse"]

STDIN = "-"


def register(subparsers: Any) -> None:
    """Add push, pop, peek and browse to ``manage.py fdbqueue``."""
    _register_push(subparsers)
    _register_reads(subparsers)


def _register_push(subparsers: Any) -> None:
    """push: one value, or one per line of a file."""
    parser = add_subcommand(
        subparsers,
        "push",
        handle_push,
        help="Add an item, or one item per line of a file.",
        description=(
            "Add an item to a queue. The value is JSON: '{\"to\": \"ada@example.com\"}', '42', or\n"
            "'\"some text\"' (text needs its JSON quotes). With --file, every non-blank line of the\n"
            "file (or of standard input, with --file -) is one JSON value; all of them get the\n"
            "same --priority. Every line is checked before anything is pushed."
        ),
    )
    add_queue_name(parser)
    parser.add_argument("value", nargs="?", help="The value, as JSON. Leave it out when using --file.")
    parser.add_argument(
        "--priority",
        type=int,
        default=0,
        help="A whole number from -2**63 to 2**63-1; FIFO queues take only 0. Default: 0.",
    )
    parser.add_argument(
        "--file",
        metavar="PATH",
        help="Push one JSON value per line of PATH (UTF-8), or of standard input when PATH is '-'.",
    )
    when = parser.add_mutually_exclusive_group()
    when.add_argument(
        "--delay",
        metavar="S",
        type=seconds,
        help="Keep the item hidden for S seconds (at most 366 days); then it is popped in priority order.",
    )
    when.add_argument(
        "--not-before",
        metavar="ISO",
        type=moment,
        help="Keep the item hidden until this time, with its zone: 2026-05-01T09:00:00Z.",
    )
    parser.add_argument(
        "--dedup-key",
        metavar="K",
        help=(
            "1 to 200 characters. If an item pushed with K is still queued, delayed, leased, or was "
            "consumed less than 5 minutes ago, nothing is added and that item is shown. Single VALUE only."
        ),
    )
    parser.add_argument(
        "--key",
        metavar="K",
        help="The item's limit key (a customer id, an API host; 1 to 100 bytes of UTF-8): the queue's "
        "key limits count it. Applies to every line of --file too.",
    )
    parser.add_argument(
        "--tenant",
        metavar="T",
        help="The item's tenant (1 to 100 bytes of UTF-8): required by a queue created with --tenants, "
        "refused by any other. Applies to every line of --file too.",
    )


def _register_reads(subparsers: Any) -> None:
    """pop, peek and browse: from one end of a queue, removing items or not."""
    parser = add_subcommand(
        subparsers, "pop", handle_pop, help="Remove and show the next item (or -n items) from one end."
    )
    add_queue_name(parser)
    add_end(parser)
    parser.add_argument(
        "-n", dest="count", metavar="N", type=positive_int, help="Pop up to this many items (output is then a list)."
    )
    add_wait(parser, "before giving up")

    parser = add_subcommand(
        subparsers, "peek", handle_peek, help="Show the next item (or -n items) from one end, removing nothing."
    )
    add_queue_name(parser)
    add_end(parser)
    parser.add_argument(
        "-n",
        dest="count",
        metavar="N",
        type=positive_int,
        help=f"Show up to this many items, at most {service.LIMIT_MAX} (output is then a list).",
    )

    parser = add_subcommand(
        subparsers, "browse", handle_browse, help="Page through a queue's items in pop order, removing nothing."
    )
    add_queue_name(parser)
    add_end(parser)
    add_paging(parser, "items")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is out of the range of a double")
    return number


def parse_value(text: str, where: str = "VALUE") -> Any:
    """The JSON value in ``text``; a usage error (exit 2) that says where and why otherwise.

    NaN, Infinity and numbers too large for a double (1e400), which Python's parser would let
    through as floats, are refused here, where the message can point at the input.
    """
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as error:
        hint = ""
        if error.pos == 0 and text.strip()[:1].isalpha():
            hint = " (text must be quoted as a JSON string, e.g. '\"hello\"')"
        raise usage_error(f"{where} is not valid JSON: {error.msg} at column {error.colno}{hint}.") from None
    except ValueError as error:
        raise usage_error(f"{where} is not valid JSON: {error}.") from None
    except RecursionError:
        raise usage_error(f"{where} is nested too deeply.") from None


def _parse_lines(lines: Iterable[str], source: str) -> list[Any]:
    values = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            values.append(parse_value(line, where=f"Line {number} of {source}"))
    return values


def _read_values(ctx: Context, path: str) -> list[Any]:
    """Every value of the file (or standard input), parsed before anything is pushed."""
    if path == STDIN:
        try:
            return _parse_lines(ctx.stdin, "standard input")
        except UnicodeDecodeError as error:
            raise usage_error(f"Standard input is not valid text: {error.reason}.") from None
    try:
        with open(path, encoding="utf-8") as stream:
            return _parse_lines(stream, path)
    except OSError as error:
        raise usage_error(f"Cannot read {path}: {error.strerror or error}.") from None
    except UnicodeDecodeError as error:
        raise usage_error(f"{path} is not UTF-8 text: {error.reason}.") from None


def _pushed_text(item: Any) -> str:
    text = items_table([item])
    if item.duplicate:
        text += (
            "\nDuplicate: the item shown was pushed earlier with this dedup key (its value as stored, "
            "null once it was consumed); nothing was added."
        )
    return text


def handle_push(ctx: Context, options: dict[str, Any]) -> None:
    """Push the VALUE argument, or every line of --file, all with --priority (and --delay/--not-before)."""
    name, text, path, priority = options["name"], options["value"], options["file"], options["priority"]
    dedup_key = options["dedup_key"]
    if text is not None and path is not None:
        raise usage_error("Give either a VALUE or --file, not both.")
    if text is None and path is None:
        raise usage_error("Give a VALUE to push (as JSON), or --file PATH (--file - reads standard input).")
    if dedup_key is not None and path is not None:
        raise usage_error("--dedup-key applies to a single VALUE, not to --file (each line would need its own key).")
    schedule = {"delay": options["delay"], "not_before": options["not_before"]}
    if text is not None:
        item = service.push(
            ctx.database(),
            name,
            parse_value(text),
            priority,
            dedup_key=dedup_key,
            key=options.get("key"),
            tenant=options.get("tenant"),
            **schedule,
        )
        assert isinstance(item, service.Item)  # given a database, push returns the committed item
        emit(ctx, pushed_item_data(item), lambda: _pushed_text(item))
        return
    values = _read_values(ctx, path)
    database = ctx.database()
    if not values:
        service.get_queue(database, name)  # nothing to push, but an unknown queue is still an error
    # Given a database, push_many returns the committed items.
    items = cast(
        "list[service.Item]",
        service.push_many(
            database,
            name,
            [(value, priority) for value in values],
            key=options.get("key"),
            tenant=options.get("tenant"),
            **schedule,
        ),
    )
    count = "1 item" if len(items) == 1 else f"{len(items)} items"
    emit(ctx, [pushed_item_data(item) for item in items], f"Pushed {count} to queue {name!r}.", success=True)


def handle_pop(ctx: Context, options: dict[str, Any]) -> None:
    """Pop one item (a JSON object) or, with -n, up to n (a JSON list); exit 1 when there is none.

    With --wait, an empty queue is waited on (server-side, no polling) before exit 1.
    """
    name, end, count, wait = options["name"], options["end"], options["count"], options["wait"]
    if wait is not None:
        # Wait for the first item only; with -n, the rest is whatever is there right after.
        first = service.pop(ctx.database(), name, end, wait=wait)
        if first is None:
            raise nothing_there(f"Queue {name!r} is empty (waited {wait:g}s).")
        if count is None:
            emit(ctx, item_data(first), lambda: items_table([first]))
            return
        items = [first] + (service.pop_many(ctx.database(), name, count - 1, end) if count > 1 else [])
        emit(ctx, [item_data(item) for item in items], lambda: items_table(items))
        return
    if count is None:
        item = service.pop(ctx.database(), name, end)
        if item is None:
            raise nothing_there(f"Queue {name!r} is empty.")
        emit(ctx, item_data(item), lambda: items_table([item]))
        return
    items = service.pop_many(ctx.database(), name, count, end)
    if not items:
        raise nothing_there(f"Queue {name!r} is empty.")
    emit(ctx, [item_data(item) for item in items], lambda: items_table(items))


def handle_peek(ctx: Context, options: dict[str, Any]) -> None:
    """Like pop, but the items stay; -n reads them as one page of ``service.browse``."""
    name, end, count = options["name"], options["end"], options["count"]
    if count is None:
        item = service.peek(ctx.database(), name, end)
        if item is None:
            raise nothing_there(f"Queue {name!r} is empty.")
        emit(ctx, item_data(item), lambda: items_table([item]))
        return
    if count > service.LIMIT_MAX:
        raise usage_error(f"peek -n takes at most {service.LIMIT_MAX}; use browse with --cursor to see more.")
    items = service.browse(ctx.database(), name, end=end, limit=count).items
    if not items:
        raise nothing_there(f"Queue {name!r} is empty.")
    emit(ctx, [item_data(item) for item in items], lambda: items_table(items))


def handle_browse(ctx: Context, options: dict[str, Any]) -> None:
    """One page of items in pop order; an empty page is not an error (exit 0)."""
    page = service.browse(
        ctx.database(), options["name"], end=options["end"], cursor=options["cursor"], limit=options["limit"]
    )
    data = {"items": [item_data(item) for item in page.items], "next_cursor": page.next_cursor}
    emit(ctx, data, lambda: page_text(items_table(page.items), page.next_cursor))
