"""What a row reports besides its operation count: latency percentiles and peak memory.

Latencies go into a histogram of logarithmic buckets 2 % wide rather than into a list, so a
client that runs a million operations stays a few kilobytes, costs nothing to send back from a
child process, and its percentiles are still exact to about 1 %.

Peak memory is the resident set's high-water mark (``VmHWM``). On Linux it can be reset
(``/proc/self/clear_refs``), so each row reports its own peak rather than the largest since the
process started; elsewhere it falls back to ``ru_maxrss``, which cannot be reset.
"""

from __future__ import annotations

import math
import os
import re
import resource
import sys
from typing import Any, Iterable

__all__ = ["LatencyHistogram", "reset_peak_memory", "peak_memory_mib"]

_BUCKETS_PER_E = 1.0 / math.log(1.02)
_HWM = re.compile(rb"^VmHWM:\s+(\d+)\s+kB", re.MULTILINE)


class LatencyHistogram:
    """Counts of latencies by logarithmic bucket; merge the clients' and read percentiles."""

    __slots__ = ("counts",)

    def __init__(self, counts: dict[int, int] | None = None) -> None:
        self.counts: dict[int, int] = dict(counts or {})

    def add(self, seconds: float) -> None:
        nanoseconds = seconds * 1e9
        bucket = int(math.log(nanoseconds) * _BUCKETS_PER_E) if nanoseconds > 1.0 else 0
        self.counts[bucket] = self.counts.get(bucket, 0) + 1

    def merge(self, others: Iterable["LatencyHistogram"]) -> "LatencyHistogram":
        for other in others:
            for bucket, count in other.counts.items():
                self.counts[bucket] = self.counts.get(bucket, 0) + count
        return self

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def percentile_ms(self, fraction: float) -> float | None:
        """The latency below which ``fraction`` of the operations fell, in milliseconds."""
        total = self.total
        if not total:
            return None
        rank = max(1, math.ceil(fraction * total))
        seen = 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                # The bucket's geometric middle: within 1 % of any latency it holds.
                return math.exp((bucket + 0.5) / _BUCKETS_PER_E) / 1e6
        return None  # not reached: the counts add up to total

    def __reduce__(self) -> tuple[Any, ...]:
        return (LatencyHistogram, (self.counts,))


def reset_peak_memory() -> bool:
    """Start a new high-water mark for this process; False where the platform cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_memory_mib() -> float:
    """This process's peak resident memory since the last reset (or since it started), in MiB."""
    try:
        with open("/proc/self/status", "rb") as handle:
            match = _HWM.search(handle.read())
        if match:
            return int(match.group(1)) / 1024.0
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Kilobytes on Linux, bytes on macOS.
    return peak / (1024.0 * 1024.0) if sys.platform == "darwin" else peak / 1024.0


#: The process name of FoundationDB's server, whose CPU time is the store's on a local cluster.
STORE_PROCESS = "fdbserver"


def store_cpu_seconds(name: str = STORE_PROCESS) -> float | None:
    """CPU seconds used so far by every process of this machine called ``name``; None if none runs.

    A cluster on this machine is the store's whole cost, so a row's delta of this beside its
    clients' CPU says what an operation costs in all, and whether the machine's cores capped the
    row. A remote cluster's servers are not seen: None, and the row shows the clients' CPU only.
    """
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, seen = 0, False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone since the listing, or not ours to read
        command, _, rest = stat.partition(b") ")
        if command.split(b"(", 1)[-1] != name.encode():
            continue
        fields = rest.split()
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of the line
        seen = True
    return total / ticks if seen else None
