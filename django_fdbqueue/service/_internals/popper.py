"""One high-contention pop as its caller holds it: identity, request, receipt, and what is in doubt.

A pop is known by a random token and a deadline, both chosen before it writes anything, so it
can find its request and its result without ever learning its request's versionstamp. The
receipt slot (one per client thread) and the candidates an attempt in doubt would have handed
over are how a retry after ``commit_unknown_result`` learns what its earlier attempt did
(``contention.py``, "Exactly once").
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, TypeVar, cast

from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound
from django_fdbqueue.fdbapi import tuples

from . import keys
from .catalog import Entry, require_with
from ..records import Item
from .recovery import RESULT_BELL, RESULT_LEAD_BELL, epoch

TOKEN_BYTES = 16
R = TypeVar("R")


class Outcome:
    """Sentinels for what a step decided (distinct from an Item and from None)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


STAGED = Outcome("staged")  # a request is registered: wait for a round to serve it
LEAD = Outcome("lead")  # this pop runs the next fulfil round (appointed, or nobody else does)
EMPTY = Outcome("empty")  # the pop was answered "the queue is empty"
GONE = Outcome("gone")  # neither request nor result: dropped after the deadline, or withdrawn


_client = threading.local()


def _client_id() -> bytes:
    """Random and fixed per thread of a process: the name of this client's receipt slot.

    A thread runs one pop at a time, so each pop can overwrite its thread's receipt instead of
    writing a new key per pop (and clearing it later). Checked against the process id, so a
    forked child never shares its parent's slot.
    """
    pid = os.getpid()
    if getattr(_client, "pid", None) != pid:
        _client.pid = pid
        _client.id = os.urandom(8)
    return cast(bytes, _client.id)


@dataclass
class Pop:
    """One call: its identity (token, deadline), its request, and what is in doubt after a 1021.

    ``candidates`` are the items that attempts ending in ``commit_unknown_result`` would have
    handed us, by item id; the receipt (whose value names the pop and the item) says which one,
    if any, did. ``maybe_empty`` says an attempt that would have answered us "empty" may have
    committed; it only decides what a request gone *without* a result means ("answered empty";
    the other story, a request dropped after its deadline, loses nothing by returning None).
    """

    name: str
    end: str
    deadline_us: int
    deadline: float  # the same deadline on this process's monotonic clock
    token: bytes = field(default_factory=lambda: os.urandom(TOKEN_BYTES))
    qk: keys.QueueKeys | None = None
    entry: Entry | None = None
    request_key: bytes | None = None
    candidates: dict[str, Item] = field(default_factory=dict)
    maybe_empty: bool = False
    client: bytes = field(default_factory=_client_id)
    #: This pop runs the next fulfil round (see ``contention.py``, Protocol, step 3).
    leads: bool = False
    #: The watch on :attr:`bell` (or on both bells), set by the registration's own transaction.
    watch: Any = None
    #: The watch on :attr:`lead_bell`, when the registration set one.
    lead_watch: Any = None

    def bind(self, tr: Any) -> keys.QueueKeys:
        """Read the catalog entry (an ordinary read: a racing delete makes us retry)."""
        return self.bind_with(tr, lambda _qk: None)[0]

    def bind_with(self, tr: Any, send: Callable[[keys.QueueKeys], R]) -> tuple[keys.QueueKeys, R]:
        """:meth:`bind`, with the caller's first reads (``send(qk)``) sent alongside the catalog
        check (``catalog.require_with``): one round trip for both."""
        entry, qk, sent = require_with(tr, self.name, send, fifo_ok=self.end == "min")
        if entry.tenants:  # its staged requests are served in queue order, not by turns
            raise InvalidArgument(
                f"The queue {self.name!r} is split by tenant, and a high-contention pop does not take "
                "turns between tenants: pop it with mode='plain', or claim.",
                name=self.name,
            )
        self.entry = entry
        if self.qk is None:
            self.qk = qk
        elif self.qk.queue_id != entry.queue_id:
            raise QueueNotFound(f"The queue {self.name!r} was deleted while a pop waited.", name=self.name)
        return qk, sent

    @cached_property
    def receipt_key(self) -> bytes:
        """This thread's receipt slot, in the epoch of this pop's deadline."""
        assert self.qk is not None
        return self.qk.receipts.pack((epoch(self.deadline_us), self.client))

    def receipt(self, item: Item) -> bytes:
        """The receipt's value: whose pop took which item."""
        return tuples.pack((self.token, item.id))

    @property
    def results(self) -> slice:
        assert self.qk is not None
        return self.qk.results.range((self.deadline_us, self.token))

    @property
    def bell(self) -> bytes:
        """The key a round writes when it answers this pop."""
        assert self.qk is not None
        return self.qk.results.pack((self.deadline_us, self.token, RESULT_BELL))

    @property
    def lead_bell(self) -> bytes:
        """The key a round writes when it hands this pop the next round."""
        assert self.qk is not None
        return self.qk.results.pack((self.deadline_us, self.token, RESULT_LEAD_BELL))

    def named(self, raw: Any) -> bool:
        """Does the ``lead`` key's value name this pop?"""
        return cast(bool, raw.present() and tuples.unpack(bytes(raw))[0] == self.token)

    def may_lead(self, raw: Any, now_us: int) -> bool:
        """Given the ``lead`` key's value: is nobody else running the rounds (or are we named)?"""
        if not raw.present():
            return True
        token, until_us = tuples.unpack(bytes(raw))
        return cast(bool, token == self.token or until_us < now_us)

    @property
    def in_doubt(self) -> bool:
        return bool(self.candidates) or self.maybe_empty

    def confirm(self, tr: Any) -> Item | None:
        """If an earlier attempt's fate is unknown: the item it took, when its receipt says so.

        A receipt naming another pop (an earlier pop of this thread) or none at all means the
        attempts in doubt did not commit: after reporting 1021 they never will (see "Exactly once").
        """
        if not self.candidates:
            return None
        raw = tr[self.receipt_key]
        present = raw.present()  # may raise (lazily, on a cluster): keep the candidates for the retry
        candidates, self.candidates = self.candidates, {}  # resolved either way
        if present:
            token, item_id = tuples.unpack(bytes(raw))
            if token == self.token:
                return candidates.get(item_id)
        return None

    def doubt(self, got: Item | Outcome | None) -> None:
        """An attempt that would have given us `got` ended in 1021."""
        if isinstance(got, Item):
            self.candidates[got.id] = got
        elif got is EMPTY:
            self.maybe_empty = True

    def left(self) -> float:
        return self.deadline - time.monotonic()
