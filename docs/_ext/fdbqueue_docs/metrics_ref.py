"""reference/metrics.md: every metric the app exports, from the metrics package's own objects.

Per process instruments are the module-level ``prometheus_client`` metrics of the package; the
per queue and store metrics are the families a collector class ``describe()``s. Both are read
from the live objects, so name, type, labels and help are what a scrape shows.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any, Iterator

from . import markdown as md

PACKAGE = "django_fdbqueue.metrics"
SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"], "summary": ["_sum", "_count"]}


def _modules() -> Iterator[Any]:
    package = importlib.import_module(PACKAGE)
    yield package
    for info in pkgutil.iter_modules(package.__path__, prefix=f"{PACKAGE}."):
        yield importlib.import_module(info.name)


def collect() -> list[dict[str, Any]]:
    """One row per metric: name, type, labels, help, where it is defined, what it is per."""
    from prometheus_client.metrics import MetricWrapperBase

    rows: list[dict[str, Any]] = []
    for module in _modules():
        for value in vars(module).values():
            if isinstance(value, MetricWrapperBase):
                help_text = value._documentation
                if value._type == "histogram":  # the bucket bounds, without +Inf
                    bounds = ", ".join(f"{b:g}" for b in value._upper_bounds if b != float("inf"))
                    help_text += f" Buckets (le): {bounds}."
                rows.append(
                    dict(
                        name=value._name,
                        type=value._type,
                        labels=list(value._labelnames),
                        help=help_text,
                        source=module.__name__,
                        scope="process",
                    )
                )
            elif (
                inspect.isclass(value)
                and value.__module__ == module.__name__
                and hasattr(value, "describe")
                and hasattr(value, "collect")
            ):
                for family in value().describe():
                    labels = list(getattr(family, "_labelnames", ()))
                    rows.append(
                        dict(
                            name=family.name,
                            type=family.type,
                            labels=labels,
                            help=family.documentation,
                            source=f"{module.__name__}.{value.__name__}",
                            scope="store",
                        )
                    )
    unique = {row["name"]: row for row in rows}
    return sorted(unique.values(), key=lambda row: (row["scope"] != "store", row["name"]))


def samples(row: dict[str, Any]) -> list[str]:
    return [row["name"] + suffix for suffix in SUFFIXES.get(row["type"], [""])]


def render() -> str:
    rows = collect()
    out = []
    for scope, title, intro in (
        (
            "store",
            "Queues and the store",
            "Read from the store at each scrape, so any one process reports them for the whole store.",
        ),
        (
            "process",
            "This process",
            "Counted by the process that serves the scrape (or summed over every process's files in "
            "multiprocess mode).",
        ),
    ):
        out.append(f"## {title}\n\n{intro}\n")
        out.append(
            md.table(
                ["Metric", "Type", "Labels", "Help"],
                [
                    [
                        ", ".join(md.code(s) for s in samples(row)),
                        row["type"],
                        ", ".join(md.code(label) for label in row["labels"]) or "—",
                        md.text(row["help"]),
                    ]
                    for row in rows
                    if row["scope"] == scope
                ],
            )
        )
    return "\n".join(out)
