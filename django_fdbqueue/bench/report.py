"""The run's results for people and programs: a table, a JSON document, a chart.

The table and the chart show the same rows; the JSON document holds every field of every row
plus the run's metadata, so a later run can be compared with this one by a script.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, Iterable, Mapping, Sequence

from .goals import as_data, evaluate
from .latency import summary as latency_summary
from .store_info import summary as layout_summary
from .plan import MODES
from .results import NO_STRATEGY, REFERENCES, BenchResult, Row
from .targets import OURS
from .task_names import ENQUEUED_FIRST, TASKS_DB
from .task_rows import IMMEDIATE

__all__ = [
    "PlotUnavailable",
    "check_plot_available",
    "format_report",
    "goals_of",
    "to_document",
    "write_json",
    "write_plot",
]


class PlotUnavailable(Exception):
    """--plot needs matplotlib, which is not installed."""


# --- numbers -----------------------------------------------------------------------------------


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _times(value: float | None) -> str:
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


def _workers(row: Row) -> str:
    """A tasks row's workers: none for ImmediateBackend, a process for the database backend, or threads."""
    if row.target == IMMEDIATE:
        return "inline"
    if row.target == TASKS_DB:
        return f"{row.clients} process{'es' * (row.clients > 1)}"
    threads = f"{row.clients} thread{'s' * (row.clients > 1)}"
    if row.strategy != NO_STRATEGY:
        threads += f", {row.strategy}"
    return threads + (", enqueued first" if row.mode == ENQUEUED_FIRST else "")


def _mode_order(mode: str) -> int:
    """Threads, then processes, then the tasks row that enqueues first."""
    return MODES.index(mode) if mode in MODES else len(MODES)


def _check(row: Row) -> str:
    text = {None: "-", True: "ok", False: "FAILED"}[row.exactly_once]
    return text + (" (ran dry)" if row.ran_dry and row.depth is None else "")


# --- the table ---------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], left: int) -> str:
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
    ("VS RECIPE", lambda r: _times(r.vs_recipe)),
    ("VS REDIS", lambda r: _times(r.vs_redis)),
    ("VS SQLITE", lambda r: _times(r.vs_sqlite)),
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

_TARGET_ORDER = (OURS, *REFERENCES, IMMEDIATE, TASKS_DB)
_OPERATION_ORDER = ("push", "push+pop", "claim+ack", "pop")
_DEPTH_ORDER = ("fill", "peek", "pop")


def _series_order(row: Row, strategies: Sequence[str]) -> tuple[Any, ...]:
    """Rows by target, then strategy: each series reads top to bottom (the run interleaves them)."""
    strategy = strategies.index(row.strategy) if row.strategy in strategies else -1
    return (_TARGET_ORDER.index(row.target), strategy)


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
            ("OPS/S", lambda r: _rate(r.ops_per_s)),
            *_COMMON_TAIL,
        ],
        3,
        lambda r, s: (_TARGET_ORDER.index(r.target), _OPERATION_ORDER.index(r.operation), _series_order(r, s)),
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
            ("POPS/S", lambda r: _rate(r.ops_per_s)),
            ("VS 1 CLIENT", lambda r: _times(r.vs_one_client)),
            *_CPU_COLUMNS,
            *_COMMON_TAIL,
        ],
        3,
        lambda r, s: (_series_order(r, s), _mode_order(r.mode), r.clients),
    ),
    (
        "Concurrent claims (claim + ack pairs/s of all clients, exact order and spread claims; VS 1 CLIENT:\n"
        "against the same series with one; CPU MS/OP: the clients' CPU per pair / a local cluster's)",
        lambda r: r.depth is None and r.operation == "claim+ack",
        [
            ("MODE", lambda r: r.mode),
            ("CLAIMS", lambda r: "exact" if r.strategy == NO_STRATEGY else r.strategy),
            ("CLIENTS", lambda r: str(r.clients)),
            ("PAIRS/S", lambda r: _rate(r.ops_per_s)),
            ("VS 1 CLIENT", lambda r: _times(r.vs_one_client)),
            *_CPU_COLUMNS,
            ("P50 MS", lambda r: _ms(r.p50_ms)),
            ("P99 MS", lambda r: _ms(r.p99_ms)),
            ("RETRIES/OP", _retries),
            ("EXACTLY-ONCE", _check),
        ],
        2,
        lambda r, s: (r.strategy != NO_STRATEGY, _mode_order(r.mode), r.clients),
    ),
    (
        "Queue depth (one client; VS SHALLOW: the deep row against the shallow one; fill rates are items/s)",
        lambda r: r.depth is not None,
        [
            ("TARGET", lambda r: r.target),
            ("OPERATION", lambda r: r.operation),
            ("QUEUED", lambda r: f"{r.depth:,}"),
            ("OPS/S", lambda r: _rate(r.ops_per_s)),
            ("VS SHALLOW", lambda r: _times(r.vs_shallow)),
            *_COMMON_TAIL,
        ],
        2,
        lambda r, s: (_TARGET_ORDER.index(r.target), r.depth, _DEPTH_ORDER.index(r.operation)),
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
        lambda r, s: (_TARGET_ORDER.index(r.target),),
    ),
    (
        "Tasks (Django Tasks: tasks/s from the first enqueue to the last SUCCESSFUL result; VS IMMEDIATE:\n"
        "against the framework's ImmediateBackend, which runs each task inside enqueue, the zero-cost reference;\n"
        "VS DB BACKEND: against django-tasks' database backend on SQLite (WAL), enqueued first, then one worker;\n"
        "RUNS/S: with every task enqueued first, tasks/s of the workers alone, from their start to the last result)",
        lambda r: r.group == "tasks",
        [
            ("TARGET", lambda r: r.target),
            ("WORKERS", _workers),
            ("TASKS", _task_count),
            ("TASKS/S", lambda r: _rate(r.ops_per_s)),
            ("VS IMMEDIATE", lambda r: _times(r.vs_immediate)),
            ("VS DB BACKEND", lambda r: _times(r.vs_tasks_db)),
            ("VS 1 WORKER", lambda r: _times(r.vs_one_client)),
            ("ENQUEUES/S", lambda r: _rate(r.notes["enqueue_per_s"]) if "enqueue_per_s" in r.notes else "-"),
            ("RUNS/S", lambda r: _rate(r.notes["run_per_s"]) if "run_per_s" in r.notes else "-"),
            ("RETRIES/OP", _retries),
            ("PEAK MIB", lambda r: _mib(r.peak_mib)),
            ("EXACTLY-ONCE", _check),
        ],
        2,
        lambda r, s: (_TARGET_ORDER.index(r.target), r.strategy != NO_STRATEGY, r.clients),
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
            body = _table([name for name, _ in columns], cells, left)
            parts.append(f"{title}\n{body}")
    goals = _goals(result)
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


def goals_of(result: BenchResult) -> list[Any]:
    meta = result.meta
    return evaluate(result.rows, meta["strategies"], meta["clients"], engine=meta.get("engine"))


def _goals(result: BenchResult) -> str:
    """The goals table: each figure the project has a goal for, against its reference and goal."""
    goals = goals_of(result)
    if not goals:
        return ""
    verdict = {True: "yes", False: "NO", None: "-"}
    cells = ([g.workload, g.reference, g.goal, g.shown, verdict[g.met]] for g in goals)
    body = _table(["WORKLOAD", "REFERENCE", "GOAL", "MEASURED", "MET"], cells, 3)
    where = _store_phrase(result.meta)
    latency = latency_summary(result.meta.get("store_latency"))
    return f"Goals (ratios within this run; {where})\n" + (f"{latency}\n" if latency else "") + body


def _store_phrase(meta: dict[str, Any]) -> str:
    """ "engine foundationdb: 1 process, single redundancy, memory storage engine ..." or "engine embedded"."""
    layout = layout_summary(meta.get("cluster"))
    return f"engine {meta['engine']}" + (f": {layout}" if layout else "")


def _settings_line(meta: dict[str, Any]) -> str:
    store = meta.get("store", {})
    clients = ",".join(str(count) for count in meta["clients"])
    text = (
        f"Run: {_store_phrase(meta)} (root {store.get('root')}), {meta['duration_s']:g} s per row, "
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
        "goals": as_data(goals_of(result)),
        "exactly_once": {"passed": result.exactly_once_passed, "failures": list(result.failures)},
        "warnings": list(result.warnings),
        "skipped": list(result.skipped),
    }


def write_json(result: BenchResult, path: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(to_document(result), handle, indent=2, ensure_ascii=False)
        handle.write("\n")


# --- the chart -----------------------------------------------------------------------------------

_COLOURS = {
    OURS: "#2f6db5",
    "recipe": "#4b3f72",
    "redis": "#c8443a",
    "sqlite": "#6d7a86",
    IMMEDIATE: "#b08d2e",
    TASKS_DB: "#7a8f3a",
}
_OUR_SHADES = ("#2f6db5", "#5fa35a", "#9a5fb4", "#d08a2b", "#3aa6a0")


def check_plot_available() -> None:
    """Raise PlotUnavailable unless matplotlib can be imported (checked before a long run)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise PlotUnavailable(
            "--plot needs matplotlib, which is not installed: pip install matplotlib "
            "(or leave out --plot; the table and --json-file do not need it)."
        ) from None


def _series_name(row: Row, strategies: Sequence[str]) -> str:
    if row.target != OURS or len(strategies) == 1 or row.strategy == NO_STRATEGY:
        return row.target
    return f"{row.target} ({row.strategy})"


def _colour(name: str, strategies: Sequence[str]) -> str:
    if name.startswith(OURS + " ("):
        strategy = name[len(OURS) + 2 : -1]
        if strategy in strategies:
            return _OUR_SHADES[strategies.index(strategy) % len(_OUR_SHADES)]
        return _COLOURS[OURS]
    return _COLOURS.get(name, "#444444")


def _grouped_bars(
    axes: Any,
    groups: Sequence[str],
    series: Mapping[str, Mapping[str, float | None]],
    colours: dict[str, str],
    hatches: dict[str, str | None] | None = None,
    *,
    labels: bool = False,
) -> None:
    """One cluster of bars per group, one bar per series; missing values leave a gap.

    ``labels`` marks ratio charts: each bar is labelled with its value and the axis reads in x.
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter

    names = list(series)
    width = 0.8 / max(len(names), 1)
    for position, name in enumerate(names):
        xs, heights = [], []
        for index, group in enumerate(groups):
            value = series[name].get(group)
            if value is not None and value > 0:
                xs.append(index - 0.4 + width * (position + 0.5))
                heights.append(value)
        axes.bar(
            xs,
            heights,
            width * 0.92,
            label=name,
            color=colours.get(name, "#444444"),
            hatch=(hatches or {}).get(name),
            edgecolor="white",
            linewidth=0.5,
        )
        if labels:
            for x, height in zip(xs, heights):
                axes.annotate(
                    _times(height),
                    (x, height),
                    xytext=(0, 2),
                    textcoords="offset points",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    rotation=90,
                )
    axes.set_xticks(range(len(groups)), groups)
    axes.set_yscale("log")
    values = [v for points in series.values() for v in points.values() if v is not None and v > 0]
    if values:
        # Bars on a log scale start from the decade below the smallest, not from an arbitrary edge.
        bottom = 10 ** math.floor(math.log10(min(values)))
        axes.set_ylim(bottom=bottom, top=max(values) * (4 if labels else 2))
    if labels:
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    else:
        axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.grid(axis="y", which="major", alpha=0.3)
    axes.set_axisbelow(True)


def write_plot(result: BenchResult, path: str) -> None:
    """A PNG with four panels: one client, concurrent pops, queue depth, and our/reference ratios.

    Two more, in a fourth row, when the run has tasks rows: tasks/s, and tasks/s against enqueues/s.
    """
    check_plot_available()
    from matplotlib.figure import Figure

    meta = result.meta
    strategies = list(meta["strategies"])
    rows = sorted(result.rows, key=lambda r: (_series_order(r, strategies), _mode_order(r.mode), r.clients))
    ratio_groups = sum(1 for r in rows if r.target == OURS and r.group != "tasks")
    has_tasks = any(r.group == "tasks" for r in rows)
    # Wide enough for one labelled cluster of ratio bars per row of ours.
    figure = Figure(figsize=(max(15.0, 4 + 0.34 * ratio_groups), 17 if has_tasks else 13), layout="constrained")
    grid = figure.add_gridspec(4 if has_tasks else 3, 2)
    figure.suptitle(
        f"django-fdbqueue bench: {_store_phrase(meta)}\n{meta['cpu_count']} CPUs, "
        f"{meta['duration_s']:g} s per row, {meta['date']}",
        fontsize=13,
    )

    _one_client_panel(figure.add_subplot(grid[0, 0]), rows, strategies)
    _depth_panel(figure.add_subplot(grid[0, 1]), rows)
    _concurrent_panel(figure.add_subplot(grid[1, :]), rows, strategies, meta["clients"])
    _ratio_panel(figure.add_subplot(grid[2, :]), rows, strategies)
    if has_tasks:
        _tasks_panels(figure, grid, [r for r in rows if r.group == "tasks"])
    figure.savefig(path, format="png", dpi=100)


def _one_client_panel(axes: Any, rows: list[Row], strategies: list[str]) -> None:
    """One client: push, pop, push+pop per target (push has no strategy: it joins every series)."""
    operations = ["push", "pop", "push+pop"]
    series: dict[str, dict[str, float]] = {}
    singles = [r for r in rows if r.depth is None and r.clients == 1 and r.mode == "threads" and r.group != "tasks"]
    for row in singles:
        if row.target == OURS and row.strategy == NO_STRATEGY and len(strategies) > 1:
            for strategy in strategies:
                series.setdefault(f"{OURS} ({strategy})", {})[row.operation] = row.ops_per_s
        else:
            series.setdefault(_series_name(row, strategies), {})[row.operation] = row.ops_per_s
    _grouped_bars(axes, operations, series, {name: _colour(name, strategies) for name in series})
    axes.set_title("One client: operations/s (log scale; push+pop counts pairs)")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _depth_panel(axes: Any, rows: list[Row]) -> None:
    """Queue depth: fill, peek, pop at each depth."""
    depth_rows = [r for r in rows if r.depth is not None]
    depths = sorted({r.depth for r in depth_rows if r.depth is not None})
    series: dict[str, dict[str, float]] = {}
    colours = {}
    hatches = {}
    for row in depth_rows:
        name = f"{row.target} at {row.depth:,}"
        series.setdefault(name, {})[row.operation] = row.ops_per_s
        colours[name] = _COLOURS.get(row.target, "#444444")
        hatches[name] = "//" if row.depth == depths[-1] and len(depths) > 1 else None
    _grouped_bars(axes, ["fill", "peek", "pop"], series, colours, hatches)
    axes.set_title("Queue depth: operations/s, shallow (plain) vs deep (hatched), log scale")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _concurrent_panel(axes: Any, rows: list[Row], strategies: list[str], client_counts: list[int]) -> None:
    """Concurrent pops: aggregate pops/s by client count, threads plain, processes hatched."""
    clients = [str(count) for count in client_counts]
    series: dict[str, dict[str, float]] = {}
    colours, hatches = {}, {}
    for row in rows:
        if row.depth is None and row.operation == "pop":
            base = _series_name(row, strategies)
            name = f"{base}, {row.mode}"
            series.setdefault(name, {})[str(row.clients)] = row.ops_per_s
            colours[name] = _colour(base, strategies)
            hatches[name] = "//" if row.mode == "processes" else None
    _grouped_bars(axes, clients, series, colours, hatches)
    axes.set_xlabel("concurrent clients")
    axes.set_title("Concurrent pops: aggregate pops/s of all clients (log scale; processes hatched)")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _ratio_panel(axes: Any, rows: list[Row], strategies: list[str]) -> None:
    """Ratios: each of our rows divided by the same row on each reference."""
    ours = sorted(
        (r for r in rows if r.target == OURS and any(getattr(r, f"vs_{ref}") for ref in REFERENCES)),
        key=lambda r: (
            ("one client", "concurrent", "depth").index(r.group),
            _series_order(r, strategies),
            _mode_order(r.mode),
            r.clients,
            r.depth or 0,
            (_DEPTH_ORDER if r.depth is not None else _OPERATION_ORDER).index(r.operation),
        ),
    )
    if ours:
        labels = [_short_label(row, strategies) for row in ours]
        series = {
            f"vs {reference}": {label: getattr(row, f"vs_{reference}") for label, row in zip(labels, ours)}
            for reference in REFERENCES
            if any(getattr(row, f"vs_{reference}") for row in ours)
        }
        colours = {f"vs {reference}": _COLOURS[reference] for reference in REFERENCES}
        _grouped_bars(axes, labels, series, colours, labels=True)
        axes.axhline(1.0, color="black", linewidth=0.8)
        axes.tick_params(axis="x", labelrotation=60, labelsize=8)
        axes.set_title("Ours divided by the reference: same row, same run (log scale; above 1: we are faster)")
        axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    else:
        axes.axis("off")
        axes.text(
            0.5,
            0.5,
            "No reference in this run (--recipe PATH and --compare redis,sqlite add them).",
            ha="center",
            va="center",
            fontsize=11,
        )


def _tasks_panels(figure: Any, grid: Any, rows: list[Row]) -> None:
    """Tasks/s of every tasks row, ours labelled with their ratios to the references; then ours against enqueues/s."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    rows = sorted(rows, key=lambda r: (_TARGET_ORDER.index(r.target), r.clients))
    axes = figure.add_subplot(grid[3, 0])
    names = [
        f"{r.target}, {r.clients} worker{'s' * (r.clients > 1)}" if r.target == OURS else f"{r.target}, {_workers(r)}"
        for r in rows
    ]
    heights = [max(r.ops_per_s, 1e-9) for r in rows]
    axes.bar(range(len(rows)), heights, 0.6, color=[_COLOURS.get(r.target, "#444444") for r in rows])
    for x, row in enumerate(rows):
        text = f"{_rate(row.ops_per_s)}/s"
        if row.vs_immediate is not None:
            text += f"\n{_times(row.vs_immediate)} immediate"
        if row.vs_tasks_db is not None:
            text += f"\n{_times(row.vs_tasks_db)} db backend"
        axes.annotate(
            text, (x, heights[x]), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=8
        )
    axes.set_xticks(range(len(rows)), names)
    axes.set_yscale("log")
    axes.set_ylim(bottom=10 ** math.floor(math.log10(min(heights))), top=max(heights) * 10)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.grid(axis="y", which="major", alpha=0.3)
    axes.set_axisbelow(True)
    axes.set_title("Tasks/s, first enqueue to last result (log scale)")

    axes = figure.add_subplot(grid[3, 1])
    ours = [r for r in rows if r.target == OURS]
    groups = [f"{r.clients} worker{'s' * (r.clients > 1)}" for r in ours]
    series: dict[str, dict[str, float | None]] = {
        "tasks/s": {group: r.ops_per_s for group, r in zip(groups, ours)},
        "enqueues/s": {group: r.notes.get("enqueue_per_s") for group, r in zip(groups, ours)},
    }
    _grouped_bars(axes, groups, series, {"tasks/s": _COLOURS[OURS], "enqueues/s": "#9fbbe0"})
    axes.set_title("Tasks: run vs enqueued per second, same window (log scale)")
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def _short_label(row: Row, strategies: Sequence[str]) -> str:
    if row.depth is not None:
        depth = f"{row.depth / 1e6:g}M" if row.depth >= 10**6 else f"{row.depth:,}"
        text = f"{row.operation} @{depth}"
    elif row.operation == "pop":
        text = f"pop {row.clients} {'thr' if row.mode == 'threads' else 'proc'}"
    else:
        text = row.operation
    if len(strategies) > 1 and row.strategy != NO_STRATEGY:
        text += f" [{row.strategy}]"
    return text
