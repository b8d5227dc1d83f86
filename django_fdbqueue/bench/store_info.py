"""What the measured store is: for a cluster, its layout and storage engine, from its own status.

A figure measured on a FoundationDB cluster means little without the cluster it came from: one
process or several, which redundancy mode, which storage engine (``memory`` keeps data in RAM and
a log on disk; ``ssd-2`` keeps both on disk), which FoundationDB version. The bench reads them
from the cluster's status document (the special key ``\\xff\\xff/status/json``, what ``fdbcli
status`` shows) at the start of the run, and the report prints them beside every figure.
"""

from __future__ import annotations

import json
from typing import Any, cast

__all__ = ["STATUS_KEY", "cluster_layout", "describe", "summary"]

STATUS_KEY = b"\xff\xff/status/json"


def cluster_layout(status: dict[str, Any]) -> dict[str, Any]:
    """The parts of a status document that say what kind of cluster it is."""
    cluster = status.get("cluster") or {}
    configuration = cluster.get("configuration") or {}
    processes = cluster.get("processes") or {}
    versions = sorted({p.get("version") for p in processes.values() if p.get("version")})
    coordinators = ((status.get("client") or {}).get("coordinators") or {}).get("coordinators") or []
    return {
        "processes": len(processes),
        "machines": len(cluster.get("machines") or {}),
        "coordinators": len(coordinators) or configuration.get("coordinators_count"),
        "redundancy_mode": configuration.get("redundancy_mode"),
        "storage_engine": configuration.get("storage_engine"),
        "log_engine": configuration.get("log_engine"),
        "fdb_version": ", ".join(versions) or None,
    }


def describe(db: Any, engine: str) -> dict[str, Any] | None:
    """The cluster's layout for the foundationdb engine; None for the embedded one.

    A cluster whose status cannot be read (too old a client, no permission) is reported as such
    rather than failing the run: the figures are still figures, only less well labelled.
    """
    if engine != "foundationdb":
        return None
    try:
        raw = db[STATUS_KEY]
        return cluster_layout(json.loads(bytes(raw)))
    except Exception as error:  # noqa: BLE001 - a label, never a reason to stop the bench
        return {"error": f"could not read the cluster's status: {error}"}


def summary(layout: dict[str, Any] | None) -> str | None:
    """One phrase for the report: "1 process, single redundancy, memory storage (log ssd-2), FoundationDB 7.3.79"."""
    if not layout:
        return None
    if "error" in layout:
        return cast("str | None", layout["error"])
    processes = layout["processes"]
    text = f"{processes} process{'' if processes == 1 else 'es'}"
    if layout.get("machines") and layout["machines"] != 1:
        text += f" on {layout['machines']} machines"
    text += f", {layout.get('redundancy_mode')} redundancy, {layout.get('storage_engine')} storage engine"
    if layout.get("log_engine"):
        text += f" (log {layout['log_engine']})"
    if layout.get("fdb_version"):
        text += f", FoundationDB {layout['fdb_version']}"
    return text
