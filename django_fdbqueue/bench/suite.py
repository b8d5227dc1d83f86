"""The benchmark run: which rows, in what order, on which targets, and what they mean together.

This module is the run itself: the targets (the app's queues, and the project's references
reached through :mod:`~django_fdbqueue.bench.references`), the rows in the order of
:mod:`~django_fdbqueue.bench.plan`, taken in turns row by row so that the two sides of a ratio
are measured seconds apart, and the run's metadata. How one row is measured is in
:mod:`~django_fdbqueue.bench.measure`; how the rows relate, in
:mod:`~django_fdbqueue.bench.results`.

What each row measures, and how to read the ratios, is on the docs' performance page
(docs/explanation/performance.md, "How to read these figures").
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import re
import uuid
from typing import Any

from .measure import RowMeasuring
from .plan import COMPARE_CHOICES, MODES, NO_RECIPE, BenchConfig, plan
from .progress import Progress
from .references import measure_tasks, recipe_target, start, tasks_db_missing, tasks_missing
from .results import NO_STRATEGY, REFERENCES, BenchResult, Row, memory_warnings, relate
from .runner import ProcessTeam
from .targets import OURS, Target
from .task_names import TASKS_DB

__all__ = [
    "BenchConfig",
    "Row",
    "BenchResult",
    "Bench",
    "REFERENCES",
    "COMPARE_CHOICES",
    "MODES",
    "NO_RECIPE",
    "NO_STRATEGY",
]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


class Bench(RowMeasuring):
    """One run: ``Bench(config, db).run(progress)``; ``rows`` is the plan, measured in place."""

    def __init__(self, config: BenchConfig, db: Any) -> None:
        self.config = config
        self.db = db
        self.rows = plan(config)
        self.run_id = uuid.uuid4().hex[:8]
        self.failures: list[str] = []
        self.warnings: list[str] = []
        self.skipped: list[str] = []
        if config.tasks:
            missing = tasks_missing()
            if missing:
                self.skipped.append(f"Tasks rows: {missing}")
                self.rows = [row for row in self.rows if row.group != "tasks"]
            else:
                self._drop_tasks_db_if_missing()
        if config.recipe is None:
            self.skipped.append(NO_RECIPE)
        self._tasks: dict[str, Any] | None = None
        self._block = 0
        self._rate_hint: dict[str, float] = {}
        self._scale_cap = max(2, 2 * (os.cpu_count() or 1))
        self._layout: dict[str, Any] | None = None
        self._latency: dict[str, Any] = {}

    # -- the run ---------------------------------------------------------------------------

    def run(self, progress: Progress) -> BenchResult:
        """Measure every planned row; servers, files, client processes and queues are gone after."""
        from .service_target import ServiceTarget
        from .store_info import describe

        ours = ServiceTarget.from_settings(self.db)
        engine = ours.metadata()["engine"]
        self._layout = describe(self.db, engine)
        self._store_is_cluster = engine == "foundationdb"
        self._probe_latency("start", progress)
        for message in self.skipped:
            progress.note(f"Skipped: {message}")
        with contextlib.ExitStack() as stack:
            targets: dict[str, Target] = {OURS: ours}
            if self.config.recipe is not None:
                targets["recipe"] = recipe_target(ours, self.config.recipe)
            for name in self.config.compare:
                targets[name] = start(name, stack, progress)
            references = {name: target.metadata() for name, target in targets.items() if name != OURS}
            team = stack.enter_context(ProcessTeam())
            self._measure_rows(targets, team, progress)
        # After the client processes and the Redis server are gone: the tasks rows run in this
        # process only (the project's, see references.measure_tasks).
        self._tasks = measure_tasks(self, progress)
        self._probe_latency("end", progress)
        shallow, deep = self.config.shallow_depth, self.config.deep_size
        relate(self.rows, shallow, deep)
        self.warnings += memory_warnings(self.rows, (OURS, *self.config.references), shallow, deep)
        return BenchResult(self.rows, self._meta(ours, references), self.failures, self.warnings, list(self.skipped))

    def _probe_latency(self, when: str, progress: Progress) -> None:
        """The store's commit and read-version latency now, with nothing else running (see ``latency``)."""
        from django_fdbqueue.connection import root_subspace

        from .latency import probe, probe_key

        measured = probe(self.db, probe_key(root_subspace(), self.run_id)).as_data()
        self._latency[when] = measured
        progress.note(
            f"Store latency at the {when}: commit {measured['commit_ms']:.3g} ms, read version "
            f"{measured['read_version_ms']:.3g} ms (medians of {measured['samples']})."
        )

    def _measure_rows(self, targets: dict[str, Target], team: ProcessTeam, progress: Progress) -> None:
        """Measure the planned queue rows in order; each queue is dropped after the last row using it."""
        rows = [row for row in self.rows if row.group != "tasks"]
        queues = [(row.target, *self._queue_of(row)) for row in rows]
        last_use = {queue: index for index, queue in enumerate(queues)}
        prepared: set[tuple[str, str, str | None]] = set()
        try:
            for index, row in enumerate(rows):
                name, queue, strategy = key = queues[index]
                target = targets[name]
                progress.start(row.label())
                if key not in prepared:
                    target.prepare(queue, strategy)
                    prepared.add(key)
                self._measure(target, row, queue, strategy, team, progress)
                progress.done(row.summary())
                if last_use[key] == index:
                    prepared.discard(key)
                    target.drop(queue, strategy)
        finally:
            for name, queue, strategy in prepared:
                with contextlib.suppress(Exception):
                    targets[name].drop(queue, strategy)

    def _queue_of(self, row: Row) -> tuple[str, str | None]:
        """The queue a row works on, and the strategy whose layout it has."""
        strategy = None if row.strategy == NO_STRATEGY else row.strategy
        if row.operation == "claim+ack":
            # Exact and spread claims work on plain queues; each series has its own.
            return f"fdbqueue-bench.{self.run_id}.claims-{_safe(row.strategy)}", None
        if row.depth is not None:
            purpose = f"depth-{row.depth}"
        elif row.operation == "push":
            purpose = "push"
        elif row.operation == "push+pop":
            purpose = f"pairs-{_safe(row.strategy)}"
        elif row.operation == "wake":
            purpose = "wake"
        else:
            purpose = f"pops-{_safe(row.strategy)}"
        return f"fdbqueue-bench.{self.run_id}.{purpose}", strategy

    def _drop_tasks_db_if_missing(self) -> None:
        """Leave out the database backend's row, with a line saying why, where it cannot run here."""
        why = tasks_db_missing()
        if why:
            self.skipped.append(why)
            self.rows = [row for row in self.rows if row.target != TASKS_DB]

    def _meta(self, ours: Target, references: dict[str, dict[str, Any]]) -> dict[str, Any]:
        import django

        import django_fdbqueue

        store = ours.metadata()
        meta: dict[str, Any] = {
            "tool": "manage.py fdbqueue bench",
            "version": django_fdbqueue.__version__,
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "engine": store.get("engine"),
            "store": store,
            "cluster": self._layout,
            "store_latency": self._latency or None,
            "python": platform.python_version(),
            "python_implementation": platform.python_implementation(),
            "django": django.get_version(),
            "platform": platform.platform(terse=True),
            "cpu_count": os.cpu_count(),
            "strategies": list(self.config.strategies),
            "duration_s": self.config.duration,
            "clients": list(self.config.clients),
            "modes": list(self.config.modes),
            "deep_size": self.config.deep_size,
            "shallow_size": self.config.shallow_depth,
            "quick": self.config.quick,
            "compare": list(self.config.compare),
            "references": references,
            "tasks": self._tasks,
            "skipped": list(self.skipped),
            "exactly_once_passed": not self.failures,
        }
        return meta
