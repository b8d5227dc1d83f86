"""Task results stored in FoundationDB beside the queues, readable from any process.

One JSON record per result (``root/"T"/"r"/result_id``), a listing index by backend, queue,
status and enqueue time for the admin, and retention entries for finished results, pruned a few
(:data:`PRUNE_BATCH`) at a time by whoever finishes a task. Every change is one transaction that
reads the record with an ordinary read, so two workers racing on one task conflict.

The keys and why: the docs' data model page, "Task results" (docs/explanation/data-model.md).
A workflow's member also names its workflow and node (``workflow``): its finish releases the
nodes that wait on it, in the same transaction (see ``workflows``).
"""

from __future__ import annotations

import functools
import json
import secrets
import string
from dataclasses import dataclass, field
from typing import Any

from django_fdbqueue.connection import root_subspace
from django_fdbqueue.fdbapi import Subspace, transactional
from django_fdbqueue.service.records import now_micros

TASKS = "T"
RECORDS = "r"
INDEX = "i"
EXPIRY = "e"
PRUNE_BATCH = 8

READY = "READY"
RUNNING = "RUNNING"
SUCCESSFUL = "SUCCESSFUL"
FAILED = "FAILED"
STATUSES = (READY, RUNNING, SUCCESSFUL, FAILED)
FINISHED = (SUCCESSFUL, FAILED)


# A result id: 32 characters of [A-Za-z0-9], as the framework's own ids.
ID_LENGTH = 32
_ID_ALPHABET = string.ascii_letters + string.digits
_ID_UNBIASED = 256 - 256 % len(_ID_ALPHABET)  # bytes at or past this would favour some characters


def new_id() -> str:
    """A random result id, from one read of the OS's random source.

    The framework's ``get_random_id`` draws each of the 32 characters apart, which made a
    tenth of an enqueue's cost; this takes whole bytes and drops the few that would bias the
    choice, so every character stays equally likely.
    """
    chars: list[str] = []
    while len(chars) < ID_LENGTH:
        chars += [_ID_ALPHABET[b % len(_ID_ALPHABET)] for b in secrets.token_bytes(ID_LENGTH + 8) if b < _ID_UNBIASED]
    return "".join(chars[:ID_LENGTH])


@functools.lru_cache(maxsize=8)
def _spaces(root: Subspace) -> tuple[Subspace, Subspace, Subspace, Subspace]:
    """The results' subspaces under one root (records, listing, retention): built once, as
    every task's enqueue, start and finish packs keys in them."""
    space = root[TASKS]
    return space, space[RECORDS], space[INDEX], space[EXPIRY]


@dataclass
class Record:
    """One task's result as stored: JSON-friendly fields only (times in microseconds, UTC)."""

    id: str
    task_path: str
    backend: str
    queue_name: str
    priority: int
    args: list[Any]
    kwargs: dict[str, Any]
    takes_context: bool = False
    run_after_us: int | None = None
    status: str = READY
    enqueued_us: int | None = None
    started_us: int | None = None
    finished_us: int | None = None
    last_attempted_us: int | None = None
    worker_ids: list[str] = field(default_factory=list)
    errors: list[dict[str, str]] = field(default_factory=list)
    return_value: Any = None
    expires_us: int | None = None
    # [workflow id, node index] for a workflow's member (see ``workflows``); None for a lone task.
    workflow: list[Any] | None = None

    def dumps(self) -> bytes:
        data = self.__dict__
        if data["workflow"] is None:  # a lone task's record stays as it was before workflows
            data = {name: value for name, value in data.items() if name != "workflow"}
        return json.dumps(data, separators=(",", ":"), allow_nan=False).encode()

    @classmethod
    def loads(cls, raw: bytes) -> "Record":
        """Fields this version does not know (written by a newer one) are ignored, not fatal."""
        data = json.loads(raw)
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


# --- keys --------------------------------------------------------------------------------------


def record_key(result_id: str) -> bytes:
    return _spaces(root_subspace())[1].pack((result_id,))


def _index_key(record: Record) -> bytes:
    index = _spaces(root_subspace())[2]
    return index.pack((record.backend, record.queue_name, record.status, record.enqueued_us or 0, record.id))


def _expiry_key(expires_us: int, result_id: str) -> bytes:
    return _spaces(root_subspace())[3].pack((expires_us, result_id))


# --- reading -------------------------------------------------------------------------------------


def read(tr: Any, result_id: str) -> Record | None:
    raw = tr[record_key(result_id)]
    return Record.loads(bytes(raw)) if raw.present() else None


@transactional
def get(tr: Any, result_id: str) -> Record | None:
    return read(tr, result_id)


@transactional
def page(
    tr: Any, backend: str, queue_name: str, status: str, after: tuple[Any, ...] | None, limit: int
) -> tuple[list[Record], tuple[Any, ...] | None]:
    """Records of one queue in one status, oldest enqueued first; the position of the last when more follow."""
    index = _spaces(root_subspace())[2]
    begin, end = _bounds(backend, queue_name, status)
    if after is not None:
        begin = index.pack((backend, queue_name, status, *after)) + b"\x00"
    rows = list(tr.get_range(begin, end, limit=limit + 1))
    ids = [index.unpack(bytes(kv.key))[4] for kv in rows[:limit]]
    futures = [tr[record_key(result_id)] for result_id in ids]
    records = [Record.loads(bytes(f)) for f in futures if f.present()]
    last = None
    if len(rows) > limit:
        last = tuple(index.unpack(bytes(rows[limit - 1].key))[3:5])
    return records, last


@transactional
def counts(tr: Any, backend: str, queue_name: str, limit: int = 1000) -> dict[str, int]:
    """How many of the queue's tasks are in each status (counting up to ``limit`` each)."""
    futures = {status: tr.get_range(*_bounds(backend, queue_name, status), limit=limit) for status in STATUSES}
    return {status: sum(1 for _ in rows) for status, rows in futures.items()}


def _bounds(backend: str, queue_name: str, status: str) -> tuple[bytes, bytes]:
    r = _spaces(root_subspace())[2].range((backend, queue_name, status))
    return r.start, r.stop


# --- writing -------------------------------------------------------------------------------------


def write(tr: Any, record: Record, previous: Record | None) -> None:
    """Store ``record``, moving its index entry (and retention entry) from where ``previous`` had them."""
    if previous is not None:
        del tr[_index_key(previous)]
        if previous.expires_us is not None:
            del tr[_expiry_key(previous.expires_us, previous.id)]
    tr[record_key(record.id)] = record.dumps()
    tr[_index_key(record)] = b""
    if record.expires_us is not None:
        tr[_expiry_key(record.expires_us, record.id)] = b""


def forget(tr: Any, record: Record) -> None:
    """Delete a result: its record, its listing entry and its retention entry."""
    del tr[record_key(record.id)]
    del tr[_index_key(record)]
    if record.expires_us is not None:
        del tr[_expiry_key(record.expires_us, record.id)]


def prune(tr: Any, now_us: int | None = None) -> int:
    """Forget up to PRUNE_BATCH finished results whose retention has passed."""
    now_us = now_micros() if now_us is None else now_us
    retention = _spaces(root_subspace())[3]
    rows = list(tr.snapshot.get_range(retention.range().start, retention.pack((now_us,)), limit=PRUNE_BATCH))
    pending = []
    for kv in rows:
        expires_us, result_id = retention.unpack(bytes(kv.key))
        pending.append((bytes(kv.key), expires_us, result_id, tr[record_key(result_id)]))
    removed = 0
    for expiry_key, expires_us, _result_id, raw in pending:
        tr.add_read_conflict_key(expiry_key)
        del tr[expiry_key]
        if not raw.present():
            continue
        record = Record.loads(bytes(raw))
        if record.expires_us == expires_us:
            forget(tr, record)
            removed += 1
    return removed


__all__ = [
    "Record",
    "STATUSES",
    "READY",
    "RUNNING",
    "SUCCESSFUL",
    "FAILED",
    "get",
    "read",
    "write",
    "page",
    "counts",
    "prune",
    "forget",
]
