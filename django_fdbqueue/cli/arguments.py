"""Arguments several subcommands share, spelled and checked the same way everywhere."""

from __future__ import annotations

import argparse
import datetime as dt
import math
from typing import Any

from django_fdbqueue.service import MAX_WAIT_SECONDS

__all__ = [
    "positive_int",
    "positive_seconds",
    "seconds",
    "moment",
    "max_attempts",
    "add_queue_name",
    "add_end",
    "add_wait",
    "add_paging",
    "add_yes",
]

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


def _number_of_seconds(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds, got {text!r}")
    return number


def positive_seconds(text: str) -> float:
    """argparse type: seconds, more than 0 (a lease, a wait). The service checks the upper bound."""
    number = _number_of_seconds(text)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected more than 0 seconds, got {text}")
    return number


def seconds(text: str) -> float:
    """argparse type: seconds, 0 or more (a delay). The service checks the upper bound."""
    number = _number_of_seconds(text)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 seconds or more, got {text}")
    return number


def moment(text: str) -> dt.datetime:
    """argparse type: an ISO 8601 time with its time zone (``2026-05-01T09:00:00Z``).

    A time without a zone is refused rather than guessed: the server, the shell and the person
    typing may all be in different zones.
    """
    try:
        parsed = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 time such as 2026-05-01T09:00:00Z, got {text!r}"
        ) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: add Z (UTC) or an offset such as +02:00")
    return parsed


def max_attempts(text: str) -> int | None:
    """argparse type: a whole number of claims, or ``none`` for no limit. The service checks the range."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'none', got {text!r}") from None


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


def add_wait(parser: Any, doing: str) -> None:
    """--wait S, for pop and claim: bounded by the service's one cap, which says why."""
    parser.add_argument(
        "--wait",
        metavar="S",
        type=positive_seconds,
        help=f"When nothing is visible, wait up to S seconds (at most {MAX_WAIT_SECONDS:g}, as over REST) "
        f"for an item {doing}; for longer, run it in a loop.",
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
