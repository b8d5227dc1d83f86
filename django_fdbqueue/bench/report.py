"""The run's results for people and programs: a table and a JSON document.

The JSON document holds every field of every row plus the run's metadata, so a later run can be
compared with this one by a script. The goals table and the chart are the project's (its
benchmarks, through ``references``): from a clone the report carries them too, and the chart
draws with the formatting helpers here (``times``, ``rate``, the row orders...).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable, Iterable, Sequence

from .latency import summary as latency_summary
from .store_info import summary as layout_summary
from .plan import MODES
from .references import goals_data, goals_table
from .results import NO_STRATEGY, REFERENCES, BenchResult, Row
from .targets import OURS
from .task_names import ENQUEUED_FIRST, IMMEDIATE, TASKS_DB

__all__ = [
    "DEPTH_ORDER",
    "OPERATION_ORDER",
    "TARGET_ORDER",
    "format_report",
    "mode_order",
    "rate",
    "series_order",
    "store_phrase",
    "table",
    "times",
    "to_document",
    "workers",
    "write_json",
]


# --- numbers -----------------------------------------------------------------------------------


def rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def times(value: float | None) -> str:
    """A ratio: two decimals from 1 up, three significant digits below (0.0612x, 0.85x, 1.30x)."""
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}x"
    if value >= 1:
        return f"{value:.2f}x"
    return f"{value:.3g}x"


def _retries(row: Row) -> str:
    return "-" if row.retries_per_op is None else f"{row.retries_per_op:.3f}"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _task_count(row: Row) -> str:
    """A tasks row's tasks; the reference repeats its N tasks over rounds: N x rounds."""
    rounds = row.notes.get("rounds", 1)
    return f"{row.ops // rounds:,} x {rounds}" if rounds > 1 else f"{row.ops:,}"


def workers(row: Row) -> str:
    """A tasks row's workers: none for ImmediateBackend, a process for the database backend, or threads."""
    if row.target == IMMEDIATE:
        return "inline"
    if row.target == TASKS_DB:
        return f"{row.clients} process{'es' * (row.clients > 1)}"
    threads = f"{row.clients} thread{'s' * (row.clients > 1)}"
    if row.strategy != NO_STRATEGY:
        threads += f", {row.strategy}"
    return threads + (", enqueued first" if row.mode == ENQUEUED_FIRST else "")


def mode_order(mode: str) -> int:
    """Threads, then processes, then the tasks row that enqueues first."""
    return MODES.index(mode) if mode in MODES else len(MODES)


def _check(row: Row) -> str:
    text = {None: "-", True: "ok", False: "FAILED"}[row.exactly_once]
    return text + (" (ran dry)" if row.ran_dry and row.depth is None else "")


# --- the table ---------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], left: int) -> str:
    """Columns two spaces apart: the first ``left`` left-aligned, the numbers right-aligned."""
    cells = [list(headers), *(list(row) for row in rows)]
    widths = [max(len(row[index]) for row in cells) for index in range(len(headers))]
    lines = []
    for row in cells:
        parts = [cell.ljust(widths[i]) if i < left else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


_Column = tuple[str, Callable[[Row], str]]

_COMMON_TAIL: list[_Column] = [
    ("P50 MS", lambda r: _ms(r.p50_ms)),
    ("P99 MS", lambda r: _ms(r.p99_ms)),
    ("RETRIES/OP", _retries),
    ("PEAK MIB", lambda r: _mib(r.peak_mib)),
    ("VS RECIPE", lambda r: times(r.vs_recipe)),
    ("VS REDIS", lambda r: times(r.vs_redis)),
    ("VS SQLITE", lambda r: times(r.vs_sqlite)),
    ("EXACTLY-ONCE", _check),
]


def _cpu(row: Row) -> str:
    """Client CPU ms per operation, and the store's after a slash when its servers were seen."""
    if row.cpu_ms_per_op is None:
        return "-"
    text = f"{row.cpu_ms_per_op:.2g}"
    return text + (f"/{row.store_cpu_ms_per_op:.2g}" if row.store_cpu_ms_per_op is not None else "")


def _busy(row: Row) -> str:
    return "-" if row.cpu_busy is None else f"{100 * row.cpu_busy:.0f}%"


#: What the concurrent sections add: CPU per operation and how busy the machine's cores were.
_CPU_COLUMNS: list[_Column] = [("CPU MS/OP", _cpu), ("CORES BUSY", _busy)]

TARGET_ORDER = (OURS, *REFERENCES, IMMEDIATE, TASKS_DB)
OPERATION_ORDER = ("push", "push+pop", "claim+ack", "pop")
DEPTH_ORDER = ("fill", "peek", "pop")


def series_order(row: Row, strategies: Sequence[str]) -> tuple[Any, ...]:
    """Rows by target, then strategy: each series reads top to bottom (the run interleaves them)."""
    strategy = strategies.index(row.strategy) if row.strategy in strategies else -1
    return (TARGET_ORDER.index(row.target), strategy)


# (title, which rows, columns, how many columns are left-aligned, row order)
_Section = tuple[str, Callable[[Row], bool], list[_Column], int, Callable[[Row, Sequence[str]], tuple[Any, ...]]]

_SECTIONS: list[_Section] = [
    (
        "One client",
        lambda r: r.depth is None and r.clients == 1 and r.mode == "threads" and r.group != "tasks",
        [
            ("TARGET", lambda r: r.target),
            ("OPERATION", lambda r: r.operation),
            ("STRATEGY", lambda r: r.strategy),
            ("OPS/S", lambda r: rate(r.ops_per_s)),
            *_COMMON_TAIL,
        ],
        3,
        lambda r, s: (TARGET_ORDER.index(r.target), OPERATION_ORDER.index(r.operation), series_order(r, s)),
    ),
    (
        "Concurrent pops (aggregate pops/s of all clients; VS 1 CLIENT: against the same series with one;\n"
        "CPU MS/OP: the clients' CPU per pop / a local cluster's; CORES BUSY: both, of the machine's cores)",
        lambda r: r.depth is None and r.operation == "pop",
        [
            ("TARGET", lambda r: r.target),
            ("MODE", lambda r: r.mode),
            ("STRATEGY", lambda r: r.strategy),
            ("CLIENTS", lambda r: str(r.clients)),
            ("POPS/S", lambda r: rate(r.ops_per_s)),
            ("VS 1 CLIENT", lambda r: times(r.vs_one_client)),
            *_CPU_COLUMNS,
            *_COMMON_TAIL,
        ],
        3,
        lambda r, s: (series_order(r, s), mode_order(r.mode), r.clients),
    ),
    (
        "Concurrent claims (claim + ack pairs/s of all clients: exact, spread and high-contention; VS 1 CLIENT:\n"
        "against the same series with one; CPU MS/OP: the clients' CPU per pair / a local cluster's)",
        lambda r: r.depth is None and r.operation == "claim+ack",
        [
            ("MODE", lambda r: r.mode),
            ("CLAIMS", lambda r: "exact" if r.strategy == NO_STRATEGY else r.strategy),
            ("CLIENTS", lambda r: str(r.clients)),
            ("PAIRS/S", lambda r: rate(r.ops_per_s)),
            ("VS 1 CLIENT", lambda r: times(r.vs_one_client)),
            *_CPU_COLUMNS,
            ("P50 MS", lambda r: _ms(r.p50_ms)),
            ("P99 MS", lambda r: _ms(r.p99_ms)),
            ("RETRIES/OP", _retries),
            ("EXACTLY-ONCE", _check),
        ],
        2,
        lambda r, s: (r.strategy != NO_STRATEGY, mode_order(r.mode), r.clients),
    ),
    (
        "Queue depth (one client; VS SHALLOW: the deep row against the shallow one; fill rates are items/s)",
        lambda r: r.depth is not None,
        [
            ("TARGET", lambda r: r.target),
            ("OPERATION", lambda r: r.operation),
            ("QUEUED", lambda r: f"{r.depth:,}"),
            ("OPS/S", lambda r: rate(r.ops_per_s)),
            ("VS SHALLOW", lambda r: times(r.vs_shallow)),
            *_COMMON_TAIL,
        ],
        2,
        lambda r, s: (TARGET_ORDER.index(r.target), r.depth, DEPTH_ORDER.index(r.operation)),
    ),
    (
        "Wake-up (a pop blocked on an empty queue, woken by another process's push; latency from the start\n"
        "of the push call to the popper holding the item)",
        lambda r: r.group == "wake",
        [
            ("TARGET", lambda r: r.target),
            ("WAKE-UPS", lambda r: f"{r.ops:,}"),
            ("P50 MS", lambda r: _ms(r.p50_ms)),
            ("P99 MS", lambda r: _ms(r.p99_ms)),
            ("EXACTLY-ONCE", _check),
        ],
        1,
        lambda r, s: (TARGET_ORDER.index(r.target),),
    ),
    (
        "Tasks (Django Tasks: tasks/s from the first enqueue to the last SUCCESSFUL result; VS IMMEDIATE:\n"
        "against the framework's ImmediateBackend, which runs each task inside enqueue, the zero-cost reference;\n"
        "VS DB BACKEND: against django-tasks' database backend on SQLite (WAL), enqueued first, then one worker;\n"
        "RUNS/S: with every task enqueued first, tasks/s of the workers alone, from their start to the last result)",
        lambda r: r.group == "tasks",
        [
            ("TARGET", lambda r: r.target),
            ("WORKERS", workers),
            ("TASKS", _task_count),
            ("TASKS/S", lambda r: rate(r.ops_per_s)),
            ("VS IMMEDIATE", lambda r: times(r.vs_immediate)),
            ("VS DB BACKEND", lambda r: times(r.vs_tasks_db)),
            ("VS 1 WORKER", lambda r: times(r.vs_one_client)),
            ("ENQUEUES/S", lambda r: rate(r.notes["enqueue_per_s"]) if "enqueue_per_s" in r.notes else "-"),
            ("RUNS/S", lambda r: rate(r.notes["run_per_s"]) if "run_per_s" in r.notes else "-"),
            ("RETRIES/OP", _retries),
            ("PEAK MIB", lambda r: _mib(r.peak_mib)),
            ("EXACTLY-ONCE", _check),
        ],
        2,
        lambda r, s: (TARGET_ORDER.index(r.target), r.strategy != NO_STRATEGY, r.clients),
    ),
]


def format_report(result: BenchResult) -> str:
    """The tables, the headline figures, the exactly-once verdict and the run's settings."""
    latency = latency_summary(result.meta.get("store_latency"))
    parts = [latency] if latency else []
    strategies = list(result.meta["strategies"])
    for title, wanted, columns, left, order in _SECTIONS:
        rows = sorted((row for row in result.rows if wanted(row)), key=lambda row: order(row, strategies))
        if rows:
            cells = ([cell(row) for _, cell in columns] for row in rows)
            body = table([name for name, _ in columns], cells, left)
            parts.append(f"{title}\n{body}")
    goals = goals_table(result)
    if goals:
        parts.append(goals)
    if result.headline():
        parts.append("\n".join(result.headline()))
    popping = [row for row in result.rows if row.exactly_once is not None]
    if result.exactly_once_passed:
        parts.append(f"Exactly-once: passed ({len(popping)} rows checked: no item taken twice, none lost).")
    else:
        parts.append("Exactly-once: FAILED\n" + "\n".join(f"  {failure}" for failure in result.failures))
    if result.warnings:
        parts.append("Warnings:\n" + "\n".join(f"  {warning}" for warning in result.warnings))
    if result.skipped:
        parts.append("Skipped:\n" + "\n".join(f"  {message}" for message in result.skipped))
    parts.append(_settings_line(result.meta))
    return "\n\n".join(parts)


def store_phrase(meta: dict[str, Any]) -> str:
    """ "engine foundationdb: 1 process, single redundancy, memory storage engine ..." or "engine embedded"."""
    layout = layout_summary(meta.get("cluster"))
    return f"engine {meta['engine']}" + (f": {layout}" if layout else "")


def _settings_line(meta: dict[str, Any]) -> str:
    store = meta.get("store", {})
    clients = ",".join(str(count) for count in meta["clients"])
    text = (
        f"Run: {store_phrase(meta)} (root {store.get('root')}), {meta['duration_s']:g} s per row, "
        f"clients {clients}, deep size {meta['deep_size']:,}, strategies {', '.join(meta['strategies'])}; "
        f"{meta['cpu_count']} CPUs, Python {meta['python']}, {meta['date']}."
    )
    latency = latency_summary(meta.get("store_latency"))
    if latency:
        text += f" {latency}"
    references = meta.get("references", {})
    if "recipe" in references:
        recipe = references["recipe"]
        text += (
            f" Recipe: {recipe.get('source')} (sha256 {str(recipe.get('sha256'))[:12]}), run as it is with "
            f"{recipe.get('transactional')} transactional on the same store."
        )
    if "redis" in references:
        text += f" Redis {references['redis'].get('server_version')} over loopback TCP, no persistence."
    if "sqlite" in references:
        text += (
            f" SQLite {references['sqlite'].get('sqlite_version')}, WAL, synchronous=NORMAL, "
            f"{references['sqlite'].get('location')}."
        )
    tasks = meta.get("tasks")
    if tasks:
        text += (
            f" Tasks: {tasks['per_row']:,} per row, {tasks['framework']}, reference "
            f"{tasks['reference'].rsplit('.', 1)[-1]}."
        )
        database = tasks.get("database_backend")
        if database:
            text += (
                f" Database backend: {database['package']} on SQLite {database['sqlite_version']}, "
                f"{database['journal_mode'].upper()}, synchronous={database['synchronous'].upper()}, persistent "
                f"connection, {database['location']}; every task enqueued, then run by db_worker --batch in one "
                "process."
            )
    return text


# --- JSON ----------------------------------------------------------------------------------------


def _rounded(value: Any, digits: int) -> Any:
    return None if value is None else round(value, digits)


def _row_data(row: Row) -> dict[str, Any]:
    data = dataclasses.asdict(row)
    data["group"] = row.group
    for name in ("ops_per_s", "peak_mib"):
        data[name] = _rounded(data[name], 2)
    for name in ("p50_ms", "p99_ms", "retries_per_op"):
        data[name] = _rounded(data[name], 5)
    for name in (
        "vs_recipe",
        "vs_redis",
        "vs_sqlite",
        "vs_pop",
        "vs_one_client",
        "vs_shallow",
        "vs_immediate",
        "vs_tasks_db",
    ):
        data[name] = _rounded(data[name], 5)
    if row.retries_by_code is not None:
        data["retries_by_code"] = {str(code): count for code, count in row.retries_by_code.items()}
    return data


def to_document(result: BenchResult) -> dict[str, Any]:
    """Everything about the run, as JSON data."""
    return {
        "meta": result.meta,
        "rows": [_row_data(row) for row in result.rows],
        "headline": result.headline(),
        "goals": goals_data(result),
        "exactly_once": {"passed": result.exactly_once_passed, "failures": list(result.failures)},
        "warnings": list(result.warnings),
        "skipped": list(result.skipped),
    }


def write_json(result: BenchResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(to_document(result), handle, indent=2, ensure_ascii=False)
        handle.write("\n")
