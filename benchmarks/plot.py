"""The bench's chart (``--plot FILE.png``): the run's rows drawn in panels, ours beside the
references, with our rows divided by each reference's.

The project's figures (the docs' performance page) are drawn here; the report's table and JSON
document are the app's (:mod:`django_fdbqueue.bench.report`), whose formatting and row orders the
chart shares, so both read alike.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from django_fdbqueue.bench.references import PlotUnavailable
from django_fdbqueue.bench.report import (
    DEPTH_ORDER,
    OPERATION_ORDER,
    TARGET_ORDER,
    mode_order,
    rate,
    series_order,
    store_phrase,
    times,
    workers,
)
from django_fdbqueue.bench.results import NO_STRATEGY, REFERENCES, BenchResult, Row
from django_fdbqueue.bench.targets import OURS
from django_fdbqueue.bench.task_names import IMMEDIATE, TASKS_DB

__all__ = ["check_plot_available", "write_plot"]

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
                    times(height),
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
    rows = sorted(result.rows, key=lambda r: (series_order(r, strategies), mode_order(r.mode), r.clients))
    ratio_groups = sum(1 for r in rows if r.target == OURS and r.group != "tasks")
    has_tasks = any(r.group == "tasks" for r in rows)
    # Wide enough for one labelled cluster of ratio bars per row of ours.
    figure = Figure(figsize=(max(15.0, 4 + 0.34 * ratio_groups), 17 if has_tasks else 13), layout="constrained")
    grid = figure.add_gridspec(4 if has_tasks else 3, 2)
    figure.suptitle(
        f"django-fdbqueue bench: {store_phrase(meta)}\n{meta['cpu_count']} CPUs, "
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
            series_order(r, strategies),
            mode_order(r.mode),
            r.clients,
            r.depth or 0,
            (DEPTH_ORDER if r.depth is not None else OPERATION_ORDER).index(r.operation),
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

    rows = sorted(rows, key=lambda r: (TARGET_ORDER.index(r.target), r.clients))
    axes = figure.add_subplot(grid[3, 0])
    names = [
        f"{r.target}, {r.clients} worker{'s' * (r.clients > 1)}" if r.target == OURS else f"{r.target}, {workers(r)}"
        for r in rows
    ]
    heights = [max(r.ops_per_s, 1e-9) for r in rows]
    axes.bar(range(len(rows)), heights, 0.6, color=[_COLOURS.get(r.target, "#444444") for r in rows])
    for x, row in enumerate(rows):
        text = f"{rate(row.ops_per_s)}/s"
        if row.vs_immediate is not None:
            text += f"\n{times(row.vs_immediate)} immediate"
        if row.vs_tasks_db is not None:
            text += f"\n{times(row.vs_tasks_db)} db backend"
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
