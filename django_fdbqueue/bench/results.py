"""The measured rows, and what they mean together: ratios between rows, and the memory check.

Our rate divided by the reference's for the same row (``vs_recipe``, ``vs_redis``,
``vs_sqlite``), each concurrent row's rate divided by the same series' one-client rate
(``vs_one_client``), each deep row's rate divided by its shallow one (``vs_shallow``), and
claim+ack pairs divided by one client's plain pops (``vs_pop``). A tasks row of ours is divided by
the ImmediateBackend's (``vs_immediate``) and by django-tasks' database backend's (``vs_tasks_db``),
and the 4-worker row by the 1-worker one (``vs_one_client``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .targets import OURS
from .task_names import ENQUEUED_FIRST, IMMEDIATE, TASKS_DB

#: Every reference, in the order the report lists them; ``vs_<name>`` of a row relates it to one.
REFERENCES = ("recipe", "redis", "sqlite")
#: The strategy column of rows that do not depend on a pop strategy (and of every reference row).
NO_STRATEGY = "-"
#: The strategy of the service's default pop, which claim+ack pairs are compared with.
PLAIN_POP = "plain"
#: Fill memory growth from the shallow to the deep fill that is reported as not flat.
FLAT_MEMORY_MIB = 64.0


@dataclass
class Row:
    """One measured line of the report. ``depth`` is set on the queue-depth rows only."""

    target: str
    operation: str
    clients: int
    mode: str
    strategy: str
    depth: int | None = None
    ops: int = 0
    seconds: float = 0.0
    ops_per_s: float = 0.0
    p50_ms: float | None = None
    p99_ms: float | None = None
    retries: int | None = None
    retries_per_op: float | None = None
    retries_by_code: dict[int, int] | None = None
    peak_mib: float | None = None
    exactly_once: bool | None = None
    ran_dry: bool = False
    #: CPU milliseconds an operation cost the clients' processes, and the store's servers when
    #: they run on this machine (a local cluster); ``cpu_busy`` is the share of the machine's
    #: cores both used in the window: near 1, the cores capped the row, not the store's design.
    cpu_ms_per_op: float | None = None
    store_cpu_ms_per_op: float | None = None
    cpu_busy: float | None = None
    vs_recipe: float | None = None
    vs_redis: float | None = None
    vs_sqlite: float | None = None
    vs_pop: float | None = None
    vs_one_client: float | None = None
    vs_shallow: float | None = None
    vs_immediate: float | None = None
    vs_tasks_db: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """Which part of the report the row belongs to."""
        if self.operation == "tasks":
            return "tasks"
        if self.operation == "wake":
            return "wake"
        if self.depth is not None:
            return "depth"
        if self.operation == "pop":
            return "concurrent"
        return "one client"

    def label(self) -> str:
        text = f"{self.target} {self.operation}"
        if self.operation == "tasks":
            if self.target == IMMEDIATE:
                return text + ", run inline by enqueue"
            if self.target == TASKS_DB:
                return text + ", database backend on SQLite (WAL), 1 worker process"
            text += f", {self.clients} worker thread{'' if self.clients == 1 else 's'}"
            if self.strategy != NO_STRATEGY:
                text += f", claims {self.strategy}"
            return text + (", every task enqueued first" if self.mode == ENQUEUED_FIRST else "")
        if self.operation == "wake":
            return f"{self.target} pop woken by a push, popper and pusher processes"
        if self.depth is not None:
            text += f" at {self.depth:,} queued"
        elif self.mode == "threads":
            text += f", {self.clients} thread{'' if self.clients == 1 else 's'}"
        else:
            text += f", {self.clients} process{'' if self.clients == 1 else 'es'}"
        if self.strategy != NO_STRATEGY:
            text += f", {self.strategy}"
        return text

    def summary(self) -> str:
        unit = "tasks/s" if self.operation == "tasks" else "ops/s"
        text = f"{self.label()}: {self.ops_per_s:,.0f} {unit}"
        if self.p50_ms is not None:
            text += f", p50 {self.p50_ms:.3g} ms, p99 {self.p99_ms:.3g} ms"
        if self.exactly_once is False:
            text += ", EXACTLY-ONCE CHECK FAILED"
        if self.ran_dry:
            text += ", ran dry"
        return text


@dataclass
class BenchResult:
    rows: list[Row]
    meta: dict[str, Any]
    failures: list[str]
    warnings: list[str]
    #: Rows not measured because something they need is not installed, and why.
    skipped: list[str] = field(default_factory=list)

    @property
    def exactly_once_passed(self) -> bool:
        return not self.failures

    def headline(self) -> list[str]:
        """The figures to quote: one client's push+pop pairs per second against each reference."""
        pairs = {row.target: row for row in self.rows if row.operation == "push+pop" and row.target != OURS}
        lines = []
        for row in self.rows:
            if row.target == OURS and row.operation == "push+pop":
                text = f"One client push+pop pairs/s ({row.strategy}): {row.ops_per_s:,.0f}"
                against = [
                    f"{getattr(row, f'vs_{name}'):.3g}x {name} ({pairs[name].ops_per_s:,.0f})"
                    for name in REFERENCES
                    if name in pairs and getattr(row, f"vs_{name}") is not None
                ]
                if against:
                    text += " = " + ", ".join(against)
                lines.append(text)
        return lines + self._tasks_headline()

    def _tasks_headline(self) -> list[str]:
        """Ours with each worker count against both references, then the database backend's own."""
        references = {r.target: r for r in self.rows if r.group == "tasks" and r.target != OURS}
        lines = []
        for row in self.rows:
            if row.group == "tasks" and row.target == OURS:
                threads = f"{row.clients} worker thread{'' if row.clients == 1 else 's'}"
                if row.strategy != NO_STRATEGY:
                    threads += f", claims {row.strategy}"
                if row.mode == ENQUEUED_FIRST:
                    threads += ", every task enqueued first"
                text = f"Tasks/s with {threads}: {row.ops_per_s:,.0f}"
                against = [
                    f"{ratio:.3g}x {name} ({references[target].ops_per_s:,.0f})"
                    for target, ratio, name in (
                        (IMMEDIATE, row.vs_immediate, "immediate"),
                        (TASKS_DB, row.vs_tasks_db, "django-tasks database backend"),
                    )
                    if ratio is not None and target in references
                ]
                lines.append(text + (" = " + ", ".join(against) if against else ""))
        if TASKS_DB in references:
            lines.append(
                f"Tasks/s of django-tasks' database backend on SQLite (WAL), 1 worker process: "
                f"{references[TASKS_DB].ops_per_s:,.0f}"
            )
        return lines


def _ratio(row: Row, other: Row | None) -> float | None:
    if other is None or other.ops_per_s <= 0 or row.ops_per_s <= 0:
        return None
    return row.ops_per_s / other.ops_per_s


def relate(rows: list[Row], shallow: int, deep: int) -> None:
    """Fill in every row's ratios to the rows it is compared with (see the module's docstring)."""
    index = {(r.target, r.operation, r.clients, r.mode, r.strategy, r.depth): r for r in rows}
    for row in rows:
        if row.target == OURS:
            for reference in REFERENCES:
                same = (reference, row.operation, row.clients, row.mode, NO_STRATEGY, row.depth)
                setattr(row, f"vs_{reference}", _ratio(row, index.get(same)))
        if row.operation in ("pop", "claim+ack") and row.depth is None:
            one = (row.target, row.operation, 1, row.mode, row.strategy, None)
            row.vs_one_client = _ratio(row, index.get(one))
        if row.operation == "claim+ack":
            row.vs_pop = _ratio(row, index.get((row.target, "pop", 1, "threads", PLAIN_POP, None)))
        if row.group == "tasks" and row.target == OURS:
            row.vs_immediate = _ratio(row, index.get((IMMEDIATE, "tasks", 1, "threads", NO_STRATEGY, None)))
            # Against one worker of the same series: enqueuing alongside, or every task enqueued first.
            row.vs_one_client = _ratio(row, index.get((OURS, "tasks", 1, row.mode, row.strategy, None)))
            row.vs_tasks_db = _ratio(row, index.get((TASKS_DB, "tasks", 1, "processes", NO_STRATEGY, None)))
        if row.depth == deep and deep != shallow:
            other = index.get((row.target, row.operation, row.clients, row.mode, row.strategy, shallow))
            row.vs_shallow = _ratio(row, other)


def memory_warnings(rows: list[Row], targets: tuple[str, ...], shallow: int, deep: int) -> list[str]:
    """Fills whose peak memory grew with the queue, on each target (and the growth in the deep row's notes)."""
    warnings = []
    fills = {(r.target, r.depth): r for r in rows if r.operation == "fill"}
    for target in targets:
        small, large = fills.get((target, shallow)), fills.get((target, deep))
        if small is None or large is None or small is large:
            continue
        if small.peak_mib is None or large.peak_mib is None:
            continue
        grown = large.peak_mib - small.peak_mib
        large.notes["fill_memory_growth_mib"] = round(grown, 1)
        if grown > FLAT_MEMORY_MIB:
            warnings.append(
                f"{target}: filling {deep:,} items took {grown:.0f} MiB more peak memory than filling "
                f"{shallow:,}; a fill should not grow with the queue."
            )
    return warnings
