"""What one bench client does, operation by operation, whatever the target.

A row's clients all get the same :class:`Work`; :func:`make_step` turns it into a function doing
one operation per call (the runner times the calls). Every target pushes the same values, so
each store encodes and decodes the same bytes: a small JSON object whose ``n`` numbers the item,
with priorities cycling over :data:`PRIORITIES` so that the priority order is exercised and not
only push order.

Two operations exist for the app's queues only (their clients offer more than push, pop and
peek): ``claim+ack``, a claim and the ack of its receipt, and ``wake``, where client 0 blocks in
``pop(wait=...)`` on an empty queue and every other client pushes an item every
:data:`WAKE_INTERVAL` seconds. A wake step reports its own latency (:class:`Timed`): from the
start of the push call, whose time the item carries, to the popper holding the item. Pusher and
popper are separate processes, so the clock is the machine's monotonic one, shared by both.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterator, NamedTuple

from .targets import Client

__all__ = [
    "OPERATIONS",
    "CLAIM_SPREAD",
    "SPREAD_CLAIMS",
    "HC_CLAIMS",
    "PRIORITIES",
    "FILL_BATCH",
    "RanDry",
    "Timed",
    "WAKE_INTERVAL",
    "WAKE_WAIT",
    "Work",
    "item",
    "batches",
    "claim_spread",
    "claim_mode",
    "make_step",
]

OPERATIONS = ("push", "pop", "push+pop", "peek", "claim+ack", "wake")
#: Seconds between two pushes of a wake row's pusher: longer than a wake-up takes, so the
#: popper is back in its wait before the next push.
WAKE_INTERVAL = 0.05
#: The longest a wake row's popper blocks in one pop (less near the row's end).
WAKE_WAIT = 5.0
#: How long a claim+ack row's leases are: far longer than the ack that follows takes.
CLAIM_LEASE = 60.0
#: The claim+ack rows come in three series: exact order (no strategy), spread claims, each
#: taking one of the first CLAIM_SPREAD ready items at random (``service.claim(spread=...)``),
#: and exact order in high-contention mode (``service.claim(mode="high-contention")``).
CLAIM_SPREAD = 64
SPREAD_CLAIMS = f"spread-{CLAIM_SPREAD}"
HC_CLAIMS = "high-contention"
PRIORITIES = 10
# Items per fill batch: the service's own push_many transaction size, so one batch is one commit.
FILL_BATCH = 5_000
# Room between two clients' value numbers, so the n of every pushed item is distinct.
_CLIENT_STRIDE = 10**12
_BODY = "bench-payload-of-forty-characters-------"


class RanDry(Exception):
    """A pop or peek found the queue empty: the row's figures no longer measure a busy queue."""


class Timed(NamedTuple):
    """What a step returns when it times itself: the item it took (None: none), the latency to
    record (None: the step was not a timed operation), and how many items it pushed."""

    popped: Hashable | None = None
    seconds: float | None = None
    pushed: int = 0


@dataclass(frozen=True)
class Work:
    """One row's job for every client: picklable, so a client process receives it as it is.

    ``first_n`` numbers the values this row pushes; ``max_ops`` stops each client early (the
    queue-depth rows time a fixed number of operations); ``spread`` makes claims spread claims,
    ``claim_mode`` high-contention ones.
    """

    operation: str
    queue: str
    strategy: str | None = None
    end: str = "min"
    first_n: int = 0
    max_ops: int | None = None
    spread: int | None = None
    claim_mode: str = "plain"

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"Unknown operation {self.operation!r}; known: {', '.join(OPERATIONS)}.")


def claim_spread(row: Any) -> int | None:
    """The spread of a claim+ack or tasks row's claims: CLAIM_SPREAD for the spread series, else None."""
    return CLAIM_SPREAD if row.operation in ("claim+ack", "tasks") and row.strategy == SPREAD_CLAIMS else None


def claim_mode(row: Any) -> str:
    """The mode of a claim+ack row's claims: "high-contention" for that series, else "plain"."""
    return HC_CLAIMS if row.operation == "claim+ack" and row.strategy == HC_CLAIMS else "plain"


def item(n: int) -> tuple[dict[str, Any], int]:
    """The n-th bench item: ``(value, priority)``."""
    return {"n": n, "body": _BODY}, n % PRIORITIES


def batches(first: int, count: int, size: int = FILL_BATCH) -> Iterator[list[tuple[dict[str, Any], int]]]:
    """Items ``first`` .. ``first + count - 1`` in lists of ``size``: a fill never holds more."""
    for start in range(first, first + count, size):
        yield [item(n) for n in range(start, min(first + count, start + size))]


def make_step(
    work: Work, client: Client, index: int, deadline: list[float] | None = None
) -> Callable[[], Hashable | Timed | None]:
    """The function that does one of ``work``'s operations as client number ``index``.

    It returns the id of the item it popped (for the exactly-once check), None when it popped
    nothing by design, or a :class:`Timed` when it timed itself; it raises :class:`RanDry` when a
    pop, claim or peek found the queue empty. ``deadline`` (``[monotonic seconds]``, moved by the
    runner) bounds the waits of the wake row.
    """
    end = work.end
    numbers = itertools.count(work.first_n + index * _CLIENT_STRIDE)
    stop = deadline if deadline is not None else [float("inf")]

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

    def claim_ack() -> Hashable:
        taken: Hashable | None = client.claim_ack(end, CLAIM_LEASE, work.spread, work.claim_mode)  # type: ignore[attr-defined]
        if taken is None:
            raise RanDry
        return taken

    steps = {"push": push, "pop": pop, "push+pop": push_pop, "peek": peek, "claim+ack": claim_ack}
    if work.operation == "wake":
        return _wake_popper(client, end, stop) if index == 0 else _wake_pusher(client, numbers, stop)
    return steps[work.operation]


def _wake_popper(client: Client, end: str, deadline: list[float]) -> Callable[[], Timed]:
    def wake() -> Timed:
        wait = min(WAKE_WAIT, deadline[0] - time.monotonic())
        if wait <= 0:
            return Timed()
        got = client.pop_waiting(end, wait)  # type: ignore[attr-defined]
        if got is None:
            return Timed()  # nothing came before the row's end
        popped, value = got
        return Timed(popped, time.monotonic() - value["sent"])

    return wake


def _wake_pusher(client: Client, numbers: Iterator[int], deadline: list[float]) -> Callable[[], Timed]:
    due: list[float] = []

    def push() -> Timed:
        if not due:  # the first push waits an interval too, so the popper is in its wait by then
            due.append(time.monotonic() + WAKE_INTERVAL)
        pause = min(due[0], deadline[0]) - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # pacing the pushes: the load is one push per interval
        due[0] += WAKE_INTERVAL
        if time.monotonic() >= deadline[0]:
            return Timed()
        value, priority = item(next(numbers))
        value["sent"] = time.monotonic()
        client.push(value, priority)
        return Timed(pushed=1)

    return push
