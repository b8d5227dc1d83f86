"""Arguments several subcommands share, spelled and checked the same way everywhere."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["positive_int", "add_queue_name", "add_end", "add_paging", "add_yes"]

DEFAULT_PAGE_SIZE = 50


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (a usage error otherwise, so exit code 2)."""
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, got {number}")
    return number


def add_queue_name(parser: Any) -> None:
    """The positional NAME; the service checks it, so the rule lives in one place."""
    parser.add_argument("name", help="The queue's name: 1 to 200 letters, digits, '.', '_' or '-'.")


def add_end(parser: Any) -> None:
    """--end min|max, the service's two ends, min by default as in the service."""
    parser.add_argument(
        "--end",
        choices=("min", "max"),
        default="min",
        help="Which end: min (lowest priority first; the only end of a FIFO queue) or max. Default: min.",
    )


def add_paging(parser: Any, what: str) -> None:
    """--limit and --cursor, as the service pages: a cursor is printed with each page that has a next one."""
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=DEFAULT_PAGE_SIZE,
        help=f"How many {what} per page, 1 to 1000. Default: {DEFAULT_PAGE_SIZE}.",
    )
    parser.add_argument("--cursor", help="Where to continue: the cursor printed with the previous page.")


def add_yes(parser: Any, what: str) -> None:
    """--yes, for scripts: destructive subcommands ask first otherwise."""
    parser.add_argument(
        "--yes",
        action="store_true",
        help=f"Do not ask before {what}. Required when standard input is not a terminal.",
    )
