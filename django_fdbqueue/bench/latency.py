"""The store's own latency, measured beside the figures: a commit, and a read version.

What a queue operation costs on a cluster is mostly round trips, so a rate means little without
the latency it was measured at: a local cluster commits in well under a millisecond, a real one
in 2-10 ms (``scripts/fdb-cluster start --commit-latency 5ms`` gives a local one that). The bench
probes the store at the start and at the end of the run, with nothing else running: the median
of ``samples`` read versions (``get_read_version``) and of as many commits of a transaction that
clears one key nobody writes (a write, so the commit goes to the cluster, but it leaves nothing
behind). A later row that wants the latency under its own load can call :func:`probe` too.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from django_fdbqueue.fdbapi import FDBError, Subspace

__all__ = ["PROBE_SAMPLES", "StoreLatency", "probe", "probe_key", "summary"]

#: Samples of each kind per probe: enough for a stable median, a fraction of a second at 5 ms.
PROBE_SAMPLES = 30
#: Attempts of one sample before the probe gives up (a commit of one clear hardly ever retries).
_ATTEMPTS = 10


@dataclass(frozen=True)
class StoreLatency:
    """Medians (and extremes) of one probe, in milliseconds."""

    samples: int
    commit_ms: float
    read_version_ms: float
    commit_max_ms: float
    read_version_max_ms: float

    def as_data(self) -> dict[str, Any]:
        return {name: round(value, 4) if isinstance(value, float) else value for name, value in asdict(self).items()}


def probe_key(root: Subspace, run_id: str) -> bytes:
    """A key under the store's root that nothing else writes (the probe only ever clears it)."""
    return root.pack(("fdbqueue-bench", run_id, "latency-probe"))


def probe(db: Any, key: bytes, samples: int = PROBE_SAMPLES) -> StoreLatency:
    """Measure ``samples`` read versions and commits on ``db`` (after one untimed warm-up)."""
    commits: list[float] = []
    read_versions: list[float] = []
    for index in range(samples + 1):
        read_version, commit = _sample(db, key)
        if index:  # the first may include connecting to the cluster
            read_versions.append(read_version)
            commits.append(commit)
    return StoreLatency(
        samples=samples,
        commit_ms=statistics.median(commits) * 1000,
        read_version_ms=statistics.median(read_versions) * 1000,
        commit_max_ms=max(commits) * 1000,
        read_version_max_ms=max(read_versions) * 1000,
    )


def _sample(db: Any, key: bytes) -> tuple[float, float]:
    """Seconds of one new transaction's read version, then of its commit of one clear."""
    tr = db.create_transaction()
    for attempt in range(_ATTEMPTS):
        try:
            started = time.perf_counter()
            tr.get_read_version().wait()
            read = time.perf_counter()
            tr.clear(key)
            tr.commit().wait()
            return read - started, time.perf_counter() - read
        except FDBError as error:
            if attempt + 1 == _ATTEMPTS:
                raise
            tr.on_error(error).wait()  # raises what is not worth retrying
    raise AssertionError("unreachable")


def summary(latency: dict[str, Any] | None) -> str | None:
    """ "Store latency: commit 5.12 ms, read version 0.31 ms (medians of 30 at the start; 5.08 and
    0.33 ms at the end)." for the report; None when the run was not probed."""
    if not latency or not latency.get("start"):
        return None
    start, end = latency["start"], latency.get("end")
    text = (
        f"Store latency: commit {start['commit_ms']:.3g} ms, read version {start['read_version_ms']:.3g} ms "
        f"(medians of {start['samples']} at the start"
    )
    if end:
        text += f"; {end['commit_ms']:.3g} and {end['read_version_ms']:.3g} ms at the end"
    return text + ")."
