"""Where a workflow's data lives, and the two small records stored there (header and node).

Under the app's root subspace (``root / "W"``)::

    w / wf / "h"                 -> Header (JSON)
    w / wf / "n" / i             -> StoredNode (JSON): node i's task result id and how to push its item
    w / wf / "p" / i / position  -> (predecessor index, its result id), in the order given
    w / wf / "s" / i / j         -> (shard, shard size, shards): i's place among j's predecessors
    w / wf / "x" / i             -> b"R" released, b"S" settled (finished once), b"C" cancelled
    w / wf / "c" / j / shard     -> predecessors of j settled in that shard (8 bytes, little-endian)
    w / wf / "d" / j             -> shards of j complete
    w / wf / "t" / name          -> tallies, by atomic add: "succeeded", "failed", "cancelled"
    l / backend / status / created_us / wf -> b""   listing
    e / expires_us / wf                    -> b""   retention

Node ``size`` (one past the last) is the workflow's end: its predecessors are the sinks, so the
transaction that settles the last sink marks the workflow finished. Everything of one workflow
is under ``w / wf``, so forgetting it is one range clear (and its two index entries).
"""

from __future__ import annotations

import functools
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

from django_fdbqueue.connection import root_subspace
from django_fdbqueue.fdbapi import Subspace, fdb

WORKFLOWS = "W"
#: The TASKS alias the functions that take one default to (the framework's default backend).
DEFAULT_ALIAS = "default"

STORING = "STORING"
RUNNING = "RUNNING"
SUCCESSFUL = "SUCCESSFUL"
FAILED = "FAILED"
CANCELLED = "CANCELLED"
STATUSES = (STORING, RUNNING, SUCCESSFUL, FAILED, CANCELLED)
FINISHED = (SUCCESSFUL, FAILED, CANCELLED)

FAIL = "fail"
CONTINUE = "continue"
POLICIES = (FAIL, CONTINUE)

RELEASED = b"R"
SETTLED = b"S"
NODE_CANCELLED = b"C"

#: Nodes in one workflow, and how many one release may push (a workflow's roots, or the
#: successors of one node): each release is one transaction, kept well under FoundationDB's limits.
MAX_NODES = 100_000
MAX_FAN_OUT = 10_000
#: A node waiting on N predecessors splits them into at most this many counters (see ``release``).
SHARDS = 64
ONE = struct.pack("<q", 1)


def count_of(raw: Any) -> int:
    """A counter's value (an absent key is 0)."""
    return struct.unpack("<q", bytes(raw))[0] if raw.present() else 0


def counter(value: int) -> bytes:
    return struct.pack("<q", value)


def pack_pair(index: int, result_id: str) -> bytes:
    """A predecessor entry's value: its node index and its result id."""
    return bytes(fdb.tuple.pack((index, result_id)))


def unpack_pair(raw: Any) -> tuple[int, str]:
    index, result_id = fdb.tuple.unpack(bytes(raw))
    return int(index), str(result_id)


def pack_shard(shard: int, size: int, shards: int) -> bytes:
    """A successor entry's value: the shard the predecessor counts in, its size, and how many."""
    return bytes(fdb.tuple.pack((shard, size, shards)))


def unpack_shard(raw: Any) -> tuple[int, int, int]:
    shard, size, shards = fdb.tuple.unpack(bytes(raw))
    return int(shard), int(size), int(shards)


def shard_plan(predecessors: int) -> tuple[int, list[int]]:
    """(shards, size of each) for a node with that many predecessors; predecessor at position
    ``p`` counts in shard ``p % shards``. About as many shards as members per shard, so neither
    level has many members meeting on one counter; at most SHARDS."""
    shards = min(SHARDS, math.isqrt(predecessors - 1) + 1)
    base, extra = divmod(predecessors, shards)
    return shards, [base + (1 if shard < extra else 0) for shard in range(shards)]


@dataclass
class Header:
    """A workflow as a whole: its status and what it was enqueued with (times in microseconds)."""

    id: str
    backend: str
    on_failure: str
    size: int
    created_us: int
    status: str = STORING
    name: str = ""
    finished_us: int | None = None
    expires_us: int | None = None
    # Why it FAILED or was CANCELLED: {"node": i, "result_id": ..., "task_path": ...} or {"cancelled": True}.
    reason: dict[str, Any] = field(default_factory=dict)
    # Every member that will never run has its record marked (see ``stopping.sweep``).
    swept: bool = False
    # The queues of its members' items, sorted: whose grants decide who may see or stop it, in
    # one read. None for a workflow stored before the header kept them (its nodes say).
    queues: list[str] | None = None

    def dumps(self) -> bytes:
        return json.dumps(self.__dict__, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, raw: bytes) -> "Header":
        data = json.loads(raw)
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@dataclass
class StoredNode:
    """What releasing a node needs: its result id, and its item's queue, priority, delay and key."""

    result_id: str
    queue: str
    priority: int
    run_after_us: int | None
    key: str | None
    predecessors: int

    def dumps(self) -> bytes:
        return json.dumps(self.__dict__, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, raw: bytes) -> "StoredNode":
        data = json.loads(raw)
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


@functools.lru_cache(maxsize=8)
def _spaces(root: Subspace) -> tuple[Subspace, Subspace, Subspace]:
    space = root[WORKFLOWS]
    return space["w"], space["l"], space["e"]


class Keys:
    """The keys of one workflow."""

    __slots__ = ("space", "id")

    def __init__(self, workflow_id: str) -> None:
        self.id = workflow_id
        self.space = _spaces(root_subspace())[0][workflow_id]

    @property
    def header(self) -> bytes:
        return self.space.pack(("h",))

    def node(self, index: int) -> bytes:
        return self.space.pack(("n", index))

    def nodes(self, begin: int = 0, end: int | None = None) -> tuple[bytes, bytes]:
        stop = self.space.range(("n",)).stop if end is None else self.space.pack(("n", end))
        return self.space.pack(("n", begin)), stop

    def predecessor(self, index: int, position: int) -> bytes:
        return self.space.pack(("p", index, position))

    def predecessors(self, index: int, after: int | None = None) -> tuple[bytes, bytes]:
        span = self.space.range(("p", index))
        begin = span.start if after is None else self.space.pack(("p", index, after)) + b"\x00"
        return begin, span.stop

    def successor(self, index: int, successor: int) -> bytes:
        return self.space.pack(("s", index, successor))

    def successors(self, index: int) -> tuple[bytes, bytes]:
        span = self.space.range(("s", index))
        return span.start, span.stop

    def state(self, index: int) -> bytes:
        return self.space.pack(("x", index))

    def shard(self, index: int, shard: int) -> bytes:
        return self.space.pack(("c", index, shard))

    def shards_done(self, index: int) -> bytes:
        return self.space.pack(("d", index))

    def tally(self, name: str) -> bytes:
        return self.space.pack(("t", name))

    def unpack(self, key: bytes) -> tuple[Any, ...]:
        return tuple(self.space.unpack(key))

    def everything(self) -> tuple[bytes, bytes]:
        span = self.space.range()
        return span.start, span.stop


def listing_key(header: Header) -> bytes:
    return _spaces(root_subspace())[1].pack((header.backend, header.status, header.created_us, header.id))


def listing_range(backend: str, status: str, after: tuple[int, str] | None) -> tuple[bytes, bytes]:
    space = _spaces(root_subspace())[1]
    span = space.range((backend, status))
    begin = span.start if after is None else space.pack((backend, status, *after)) + b"\x00"
    return begin, span.stop


def listing_unpack(key: bytes) -> tuple[Any, ...]:
    return tuple(_spaces(root_subspace())[1].unpack(key))


def expiry_key(expires_us: int, workflow_id: str) -> bytes:
    return _spaces(root_subspace())[2].pack((expires_us, workflow_id))


def expiry_range(now_us: int) -> tuple[bytes, bytes]:
    space = _spaces(root_subspace())[2]
    return space.range().start, space.pack((now_us,))


def expiry_unpack(key: bytes) -> tuple[Any, ...]:
    return tuple(_spaces(root_subspace())[2].unpack(key))
