"""What one bench client does, operation by operation, whatever the target.

A row's clients all get the same :class:`Work`; :func:`make_step` turns it into a function doing
one operation per call (the runner times the calls). Every target pushes the same values, so
each store encodes and decodes the same bytes: a small JSON object whose ``n`` numbers the item,
with priorities cycling over :data:`PRIORITIES` so that the priority order is exercised and not
only push order.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator

from .targets import Client

__all__ = [
    "OPERATIONS",
    "PRIORITIES",
    "FILL_BATCH",
    "RanDry",
    "Work",
    "item",
    "batches",
    "make_step",
]

OPERATIONS = ("push", "pop", "push+pop", "peek")
PRIORITIES = 10
# Items per fill batch: the service's own push_many transaction size, so one batch is one commit.
FILL_BATCH = 5_000
# Room between two clients' value numbers, so the n of every pushed item is distinct.
_CLIENT_STRIDE = 10**12
_BODY = "bench-payload-of-forty-characters-------"


class RanDry(Exception):
    """A pop or peek found the queue empty: the row's figures no longer measure a busy queue."""


@dataclass(frozen=True)
class Work:
    """One row's job for every client: picklable, so a client process receives it as it is.

    ``first_n`` numbers the values this row pushes; ``max_ops`` stops each client early (the
    queue-depth rows time a fixed number of operations).
    """

    operation: str
    queue: str
    strategy: str | None = None
    end: str = "min"
    first_n: int = 0
    max_ops: int | None = None

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"Unknown operation {self.operation!r}; known: {', '.join(OPERATIONS)}.")


def item(n: int) -> tuple[dict[str, Any], int]:
    """The n-th bench item: ``(value, priority)``."""
    return {"n": n, "body": _BODY}, n % PRIORITIES


def batches(first: int, count: int, size: int = FILL_BATCH) -> Iterator[list[tuple[dict[str, Any], int]]]:
    """Items ``first`` .. ``first + count - 1`` in lists of ``size``: a fill never holds more."""
    for start in range(first, first + count, size):
        yield [item(n) for n in range(start, min(first + count, start + size))]


def make_step(work: Work, client: Client, index: int) -> Callable[[], Hashable | None]:
    """The function that does one of ``work``'s operations as client number ``index``.

    It returns the id of the item it popped (for the exactly-once check), None when it popped
    nothing by design, and raises :class:`RanDry` when a pop or peek found the queue empty.
    """
    end = work.end
    numbers = itertools.count(work.first_n + index * _CLIENT_STRIDE)

    def push() -> None:
        value, priority = item(next(numbers))
        client.push(value, priority)

    def pop() -> Hashable:
        popped = client.pop(end)
        if popped is None:
            raise RanDry
        return popped

    def push_pop() -> Hashable:
        push()
        return pop()

    def peek() -> None:
        if client.peek(end) is None:
            raise RanDry

    steps = {"push": push, "pop": pop, "push+pop": push_pop, "peek": peek}
    return steps[work.operation]
