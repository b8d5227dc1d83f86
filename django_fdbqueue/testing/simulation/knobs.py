"""The service's batch sizes and periods made small, as each seed picks (FoundationDB's simulator
randomizes its knobs for the same reason).

A defect at a batch's edge (a look that counts exactly its limit, a round that serves exactly
its batch of requests, a recovery that restores a full batch) needs as many waiters, requests or
results as the batch holds: a thousand, where a run has a dozen. With the batch at one to three,
the edges come up in most seeds. Every value here is one the service must work with.
"""

from __future__ import annotations

import contextlib
import random
from typing import Any, Iterator

from django_fdbqueue.service._internals import (
    contention,
    dedup,
    hcclaims,
    items,
    keylimits,
    recovery,
    rounds,
    settled,
    watchhub,
)
from django_fdbqueue.tasks.workflows import keys as workflow_keys
from django_fdbqueue.tasks.workflows import stopping as workflow_stopping

from .scheduler import Scheduler

#: (modules that read it, its name, small values to pick from); each knob keeps its own value
#: in half the seeds. A knob imported by name into a second module is replaced in both.
KNOBS: tuple[tuple[tuple[Any, ...], str, tuple[float, ...]], ...] = (
    ((watchhub,), "WAKE_BATCH", (1, 2, 3)),
    ((recovery,), "RECOVER_BATCH", (1, 2)),
    ((rounds,), "GRACE_SECONDS", (0.05, 0.5)),  # results recovered soon after their owner's deadline
    ((rounds,), "ROUND_REQUESTS", (1, 2, 3)),
    ((dedup,), "PRUNE_BATCH", (1,)),
    ((keylimits,), "CANDIDATES", (1, 2)),
    ((keylimits,), "MARKERS_READ", (1, 2)),
    ((items,), "POP_BATCH_ITEMS", (1, 2)),
    ((settled,), "EXPIRE_EVERY", (1, 2)),
    ((contention,), "EXPIRE_RECEIPTS_EVERY", (1, 2)),
    ((contention,), "STAGE_AFTER_CONFLICTS", (1,)),
    ((workflow_keys,), "SHARDS", (1, 2)),  # a chord's fan-in: one counter, or shards of shards
    ((workflow_stopping,), "SWEEP_NODES", (1, 2)),  # a stopped workflow swept over many pages
    ((hcclaims,), "STAGE_AFTER_CONFLICTS", (0, 1)),  # 0: every high-contention claim is staged
)


@contextlib.contextmanager
def varied(rng: random.Random, scheduler: Scheduler) -> Iterator[dict[str, float]]:
    """Replace some knobs for the run (noted in its trace); put them back after it."""
    saved: list[tuple[Any, str, Any]] = []
    chosen: dict[str, float] = {}
    try:
        for modules, name, values in KNOBS:
            if rng.random() < 0.5:
                continue
            chosen[name] = rng.choice(values)
            for module in modules:
                saved.append((module, name, getattr(module, name)))
                setattr(module, name, chosen[name])
        if chosen:
            scheduler.note("knobs: " + " ".join(f"{name}={value}" for name, value in chosen.items()))
        yield chosen
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)
