"""The service's argument checks: what a name, a priority, a number of seconds may be, said
plainly when it is not (the faces reuse them, so a refusal reads the same everywhere)."""

from __future__ import annotations

import re
from typing import cast

from django_fdbqueue.exceptions import InvalidArgument, InvalidQueueName, InvalidPriority

from .keys import ENDS, KINDS

NAME_MAX_LENGTH = 200
NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,%d}" % NAME_MAX_LENGTH)
PRIORITY_MIN = -(2**63)
PRIORITY_MAX = 2**63 - 1
DEDUP_KEY_MAX_LENGTH = 200


def check_label(value: object, field: str, max_bytes: int) -> str:
    """A short label stored in keys (a limit key, a tenant): a non-empty string of at most
    ``max_bytes`` bytes of UTF-8 that the tuple layer can encode."""
    try:
        ok = isinstance(value, str) and 1 <= len(value.encode("utf-8")) <= max_bytes
    except UnicodeEncodeError:  # lone surrogates: the tuple layer cannot store them
        ok = False
    if not ok:
        raise InvalidArgument(f"{field} must be a string of 1 to {max_bytes} bytes of UTF-8.", field=field)
    return value  # type: ignore[return-value]


def check_name(name: object) -> str:
    """Queue names are short, URL-safe and unambiguous: they appear in keys and in URLs."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        shown = name if isinstance(name, str) and len(name) <= 60 else None
        raise InvalidQueueName(
            "Queue names are 1 to 200 characters of letters, digits, '.', '_' and '-'"
            + (f"; got {shown!r}." if shown is not None else "."),
            name=shown,
        )
    return name


def check_prefix(prefix: object) -> str:
    """A listing prefix is the start of a possible name (or empty for all names)."""
    if not isinstance(prefix, str) or (prefix and not NAME_RE.fullmatch(prefix)):
        raise InvalidQueueName("prefix must be empty or the start of a queue name (letters, digits, '.', '_', '-').")
    return prefix


def check_priority(priority: object) -> int:
    """A signed 64-bit integer: what FoundationDB's other bindings can read back without loss."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise InvalidPriority(f"A priority must be an integer, not {type(priority).__name__}.", priority=None)
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise InvalidPriority("A priority must be between -2**63 and 2**63 - 1.", priority=str(priority))
    return int(priority)


def check_kind(kind: object) -> str:
    if kind not in KINDS:
        raise InvalidArgument(f"kind must be 'fifo' or 'priority', not {kind!r}.", kind=str(kind))
    return kind


def check_end(end: object) -> str:
    if end not in ENDS:
        raise InvalidArgument(f"end must be 'min' or 'max', not {end!r}.", end=str(end))
    return end


def check_count(value: object, what: str, *, minimum: int, maximum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{what} must be an integer.")
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and at most {maximum}" if maximum is not None else ""
        raise InvalidArgument(f"{what} must be at least {minimum}{upper}; got {value}.")
    return value


def check_dedup_key(key: object) -> str:
    ok = isinstance(key, str) and 1 <= len(key) <= DEDUP_KEY_MAX_LENGTH
    if ok:
        try:
            cast(str, key).encode("utf-8")  # the tuple layer stores text as UTF-8: lone surrogates cannot be
        except UnicodeEncodeError:
            ok = False
    if not ok:
        raise InvalidArgument(
            f"dedup_key must be a string of 1 to {DEDUP_KEY_MAX_LENGTH} characters (valid Unicode).",
            field="dedup_key",
        )
    return key  # type: ignore[return-value]


def check_seconds(value: object, what: str, *, minimum: float, maximum: float, inclusive_minimum: bool = True) -> float:
    """A number of seconds within bounds: finite, not a bool, and said plainly when it is not."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        number = float(value)  # type: ignore[arg-type]
        ok = number == number and number not in (float("inf"), float("-inf"))
        ok = ok and (number >= minimum if inclusive_minimum else number > minimum) and number <= maximum
    if not ok:
        lower = f"at least {minimum:g}" if inclusive_minimum else f"more than {minimum:g}"
        raise InvalidArgument(
            f"{what} must be a number of seconds, {lower} and at most {maximum:g}; got {value!r}."[:300],
            field=what,
        )
    return float(value)  # type: ignore[arg-type]
