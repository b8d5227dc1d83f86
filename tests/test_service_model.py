"""Property-based: random operation sequences on a queue agree with an in-memory model.

The model of a double-ended priority queue is a plain list of (priority, push number, value):
``pop_min`` takes the smallest (priority, number), ``pop_max`` the highest priority's smallest
number (first-pushed-first at both ends). Hypothesis drives both with the same random steps,
including several pushes and pops inside one transaction, and shrinks any disagreement to a
short sequence.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_fdbqueue import service
from django_fdbqueue.fdbapi import transactional

# Few distinct priorities make ties (the interesting case) common; the extremes test the range.
PRIORITY = st.one_of(st.integers(-2, 2), st.sampled_from([-(2**63), 2**63 - 1]))
VALUE = st.one_of(st.integers(-1000, 1000), st.text(max_size=5), st.binary(max_size=5), st.none())


class Model:
    def __init__(self) -> None:
        self.items: list[tuple[int, int, object]] = []
        self.counter = itertools.count()
        self.pushed = 0
        self.popped = 0

    def push(self, value, priority) -> None:
        self.items.append((priority, next(self.counter), value))
        self.pushed += 1

    def _pick(self, end: str):
        if not self.items:
            return None
        if end == "min":
            return min(self.items, key=lambda t: (t[0], t[1]))
        return min(self.items, key=lambda t: (-t[0], t[1]))

    def peek(self, end: str):
        return self._pick(end)

    def pop(self, end: str):
        chosen = self._pick(end)
        if chosen is not None:
            self.items.remove(chosen)
            self.popped += 1
        return chosen

    def order(self, end: str) -> list:
        key = (lambda t: (t[0], t[1])) if end == "min" else (lambda t: (-t[0], t[1]))
        return sorted(self.items, key=key)


def same(item, expected) -> bool:
    if expected is None:
        return item is None
    return item is not None and (item.priority, item.value) == (expected[0], expected[2])


class QueueMachine(RuleBasedStateMachine):
    db = None  # set by the test before running
    names = itertools.count()

    @initialize()
    def create(self) -> None:
        self.name = f"model-{next(self.names)}"
        service.create_queue(self.db, self.name, kind="priority")
        self.model = Model()
        self.ids: set[str] = set()

    @rule(value=VALUE, priority=PRIORITY)
    def push(self, value, priority) -> None:
        item = service.push(self.db, self.name, value, priority)
        assert item.id not in self.ids
        self.ids.add(item.id)
        self.model.push(value, priority)

    @rule(entries=st.lists(st.tuples(VALUE, PRIORITY), max_size=6))
    def push_many(self, entries) -> None:
        items = service.push_many(self.db, self.name, entries)
        assert [(i.value, i.priority) for i in items] == entries
        for value, priority in entries:
            self.model.push(value, priority)

    @rule(end=st.sampled_from(["min", "max"]))
    def pop(self, end) -> None:
        assert same(service.pop(self.db, self.name, end), self.model.pop(end))

    @rule(end=st.sampled_from(["min", "max"]))
    def peek(self, end) -> None:
        assert same(service.peek(self.db, self.name, end), self.model.peek(end))

    @rule(n=st.integers(1, 5), end=st.sampled_from(["min", "max"]))
    def pop_many(self, n, end) -> None:
        got = service.pop_many(self.db, self.name, n, end)
        expected = [e for e in (self.model.pop(end) for _ in range(n)) if e is not None]
        assert [(i.priority, i.value) for i in got] == [(e[0], e[2]) for e in expected]

    @rule(
        pushes=st.lists(st.tuples(VALUE, PRIORITY), max_size=3),
        pops=st.lists(st.sampled_from(["min", "max"]), max_size=3),
    )
    def one_transaction(self, pushes, pops) -> None:
        """Pops then pushes in one transaction, committed together.

        Pops come first: in FoundationDB a read that reaches where this transaction's pushes
        will land fails with 1036 (their keys are unknown until the commit).
        """

        @transactional
        def work(tr):
            popped = [service.pop(tr, self.name, end) for end in pops]
            return [service.push(tr, self.name, v, p) for v, p in pushes], popped

        pending, popped = work(self.db)
        for item, end in zip(popped, pops):
            assert same(item, self.model.pop(end))
        for (value, priority), p in zip(pushes, pending):
            self.model.push(value, priority)
            assert p.id not in self.ids
            self.ids.add(p.id)

    @rule()
    def clear(self) -> None:
        service.clear(self.db, self.name)
        self.model.items.clear()

    @precondition(lambda self: len(self.model.items) > 0)
    @rule(end=st.sampled_from(["min", "max"]), limit=st.integers(1, 4))
    def browse(self, end, limit) -> None:
        seen, cursor = [], None
        for _ in range(len(self.model.items) // limit + 1):  # exactly enough pages
            page = service.browse(self.db, self.name, end=end, cursor=cursor, limit=limit)
            seen.extend((i.priority, i.value) for i in page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        assert cursor is None
        assert seen == [(e[0], e[2]) for e in self.model.order(end)]

    @invariant()
    def statistics(self) -> None:
        info = service.get_queue(self.db, self.name)
        items = self.model.items
        assert info.size == len(items) == service.size(self.db, self.name)
        assert service.empty(self.db, self.name) == (not items)
        assert (info.pushed, info.popped) == (self.model.pushed, self.model.popped)
        assert info.min_priority == (min(p for p, _, _ in items) if items else None)
        assert info.max_priority == (max(p for p, _, _ in items) if items else None)


def test_queue_matches_model(fdbqueue_db):
    QueueMachine.db = fdbqueue_db
    try:
        run_state_machine_as_test(
            QueueMachine,
            settings=settings(
                max_examples=40,
                stateful_step_count=25,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
                database=None,
                # No "explain" phase: its line tracing makes each failing replay crawl.
                phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
            ),
        )
    finally:
        QueueMachine.db = None
