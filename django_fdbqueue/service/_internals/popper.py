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
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, TypeVar, cast

from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound
from django_fdbqueue.fdbapi import tuples

from . import keys
from .catalog import require_with
from ..records import Item
from .recovery import epoch
from .staging import EMPTY, GONE, LEAD, STAGED, TOKEN_BYTES, Outcome, Staged

__all__ = ["EMPTY", "GONE", "LEAD", "STAGED", "TOKEN_BYTES", "Outcome", "Pop"]

R = TypeVar("R")


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
class Pop(Staged):
    """One call: its identity (token, deadline, from :class:`Staged`), its request, and what is in
    doubt after a 1021.

    ``candidates`` are the items that attempts ending in ``commit_unknown_result`` would have
    handed us, by item id; the receipt (whose value names the pop and the item) says which one,
    if any, did. ``maybe_empty`` says an attempt that would have answered us "empty" may have
    committed; it only decides what a request gone *without* a result means ("answered empty";
    the other story, a request dropped after its deadline, loses nothing by returning None).
    """

    candidates: dict[str, Item] = field(default_factory=dict)
    maybe_empty: bool = False
    client: bytes = field(default_factory=_client_id)

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
