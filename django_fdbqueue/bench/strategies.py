"""The pop strategies the bench measures (``--strategy``), and how each one lays out its queue.

A strategy is the function a bench client calls to take the next item:
``pop(db, name, end) -> Item | None``, with the same contract as ``service.pop``. The app's own
are the service's pop modes (``plain``, ``high-contention``). The project's comparison strategies,
which give up exact order (random-k, sharded), are not the service's and not in the wheel: the
project's benchmarks add them when the bench runs from a clone (see ``references``), after these.

A strategy that needs its queue made, pushed, counted or removed differently (several
sub-queues, another kind) comes with a :class:`Layout`; every other one uses :data:`PLAIN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from django_fdbqueue import service
from django_fdbqueue.service import Item

__all__ = [
    "PopStrategy",
    "Layout",
    "PLAIN",
    "STRATEGIES",
    "available",
    "get_strategy",
    "layout_for",
    "registered",
]

#: ``(db, name, end) -> Item | None``: remove and return the next item, None when there is none.
PopStrategy = Callable[[Any, str, str], "Item | None"]


def _fill(db: Any, name: str, batch: Sequence[tuple[Any, int]]) -> None:
    service.push_many(db, name, batch)


def _drop(db: Any, name: str) -> None:
    if service.queue_exists(db, name):
        service.delete_queue(db, name)


@dataclass(frozen=True)
class Layout:
    """How a strategy's queue is created, pushed to, filled, counted and removed.

    ``prepare(db, name, kind)`` creates the (empty) queue; ``push(db, name, value, priority)``
    adds one item in its own transaction; ``fill(db, name, batch)`` adds a batch of
    ``(value, priority)`` pairs (the bench never hands it more than a few thousand at once);
    ``remaining(db, name)`` counts what is left, for the exactly-once check; ``drop(db, name)``
    removes everything, and is called even when the queue was never prepared.
    """

    prepare: Callable[[Any, str, str], Any] = service.create_queue
    push: Callable[[Any, str, Any, int], Any] = service.push
    fill: Callable[[Any, str, Sequence[tuple[Any, int]]], Any] = _fill
    remaining: Callable[[Any, str], int] = service.size
    drop: Callable[[Any, str], Any] = _drop


#: One service queue, used as the application would use it.
PLAIN = Layout()


def _high_contention(db: Any, name: str, end: str) -> Item | None:
    """The service's staged pop (``service/_internals/contention.py``): exact order, batched service."""
    return service.pop(db, name, end, mode="high-contention")


#: Name -> pop function: the service's pop modes.
STRATEGIES: dict[str, PopStrategy] = {
    "plain": service.pop,
    "high-contention": _high_contention,
}


def _comparisons() -> tuple[dict[str, PopStrategy], dict[str, Layout]]:
    """The project's comparison strategies and their layouts; none without its benchmarks."""
    from .references import comparison_strategies

    return comparison_strategies()


def available() -> dict[str, PopStrategy]:
    """Every strategy this run can measure, in order: the service's, then the project's."""
    return {**STRATEGIES, **_comparisons()[0]}


def get_strategy(name: str) -> PopStrategy:
    """The registered pop function; KeyError names the registered ones."""
    strategies = available()
    try:
        return strategies[name]
    except KeyError:
        raise KeyError(f"Unknown pop strategy {name!r}; registered: {', '.join(strategies)}.") from None


def layout_for(name: str | None) -> Layout:
    """The strategy's layout; the plain one for strategies that did not register their own."""
    if name is None or name in STRATEGIES:
        return PLAIN
    return _comparisons()[1].get(name, PLAIN)


def registered(names: Iterable[str] | None = None) -> tuple[str, ...]:
    """The names to run: those given (checked), or every available strategy in order."""
    if not names:
        return tuple(available())
    chosen = []
    for name in names:
        get_strategy(name)
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)
