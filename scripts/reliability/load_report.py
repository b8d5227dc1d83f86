"""The load run's report: the per-operation figures, and the report as text."""

from __future__ import annotations

import json
from typing import Any

import harness
from harness import OpFigures

OPERATION_ORDER = ["push", "batch", "pop", "claim", "ack", "release", "peek", "stats"]


def operation_figures(figures: dict[str, OpFigures], duration: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each operation's requests, rate, latencies and statuses, and the same over all of them."""
    operations = {op: op_figures.summary(duration) for op, op_figures in figures.items()}
    total = OpFigures()
    for op_figures in figures.values():
        total.latencies_ms.extend(op_figures.latencies_ms)
        for status, count in op_figures.statuses.items():
            total.statuses[status] = total.statuses.get(status, 0) + count
    return operations, total.summary(duration)


def render(report: dict[str, Any]) -> str:
    """The report as text: the per-operation table, the accounting, the checks."""
    config = report["config"]
    lines = [
        f"Load run: {config['clients']} clients in {config['client_processes']} processes, {config['duration_s']:g} s, "
        f"gunicorn {config['gunicorn_workers']} workers x {config['gunicorn_threads']} threads, embedded engine, "
        f"{config['cpus']} CPUs"
        + (f", faults {config['faults']}" if config["faults"] else "")
        + (", kills" if config["kill"] else ""),
        "",
    ]
    order = [op for op in OPERATION_ORDER if op in report["operations"]] + [
        op for op in report["operations"] if op not in OPERATION_ORDER
    ]
    rows = [
        (
            op,
            figures["requests"],
            figures["requests_per_s"],
            figures["p50_ms"],
            figures["p99_ms"],
            " ".join(f"{status}:{count}" for status, count in figures["statuses"].items()),
        )
        for op, figures in ((op, report["operations"][op]) for op in order)
    ]
    total = report["total"]
    rows.append(("all", total["requests"], total["requests_per_s"], total["p50_ms"], total["p99_ms"], ""))
    lines.append(harness.table(rows, ("operation", "requests", "req/s", "p50 ms", "p99 ms", "statuses")))
    lines += [
        "",
        "Accounting: " + json.dumps(report["accounting"]),
        "Queues at the end: " + json.dumps(report["snapshot"]),
        "Drain: " + json.dumps(report["drain"]),
        "Tasks: " + json.dumps(report["tasks"]),
    ]
    if any(report["faults_injected"].values()):
        lines.append("Faults injected: " + json.dumps(report["faults_injected"]))
    for event in report["kills"]:
        lines.append("Killed: " + json.dumps(event))
    if report.get("backup"):
        lines.append("Online backup mid-run: " + json.dumps(report["backup"]))
    lines.append("")
    lines += harness.verdicts(report)
    return "\n".join(lines)
