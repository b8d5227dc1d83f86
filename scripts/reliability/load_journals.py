"""The load run's journals: what each client and the task producer wrote, folded per operation
and per item (``read_journals``), and ``Take``, one event in an item's life."""

from __future__ import annotations

import collections
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import OpFigures

# The statuses each operation may answer; anything else is a finding.
EXPECTED = {
    "push": {200, 201},
    "batch": {201},
    "pop": {200, 204},
    "claim": {200, 204},
    "ack": {204, 409},
    "release": {200, 409},
    "stats": {200},
    "peek": {200, 204},
}


@dataclass(frozen=True)
class Take:
    """One event in an item's life as a client saw it: ``at`` when it was journaled, ``took`` how
    long the request lasted, ``lease`` for a claim.

    ``sent`` is the wall clock when the request left (journals older than this field lack it), and
    ``until`` the lease's end as the server set it, from the claim's answer. The journal's ``at``
    comes after the answer by however long the client thread waited for the CPU and the GIL: on a
    loaded machine tens of milliseconds, so ``at - took`` is no bound on when the server acted.
    """

    at: float
    took: float
    lease: float
    source: str
    kind: str  # "pop", "claim", "release", "ack", or "drain" (the driver's claim after the run)
    seq: int = 0  # the line in its journal: order within one source, whatever the clock's rounding
    sent: float | None = None
    until: float | None = None

    @property
    def start(self) -> float:
        """No later than the server acted: the request was not sent before this."""
        return self.sent if self.sent is not None else self.at - self.took

    @property
    def answered(self) -> float:
        """No earlier than the server acted: its answer had arrived by then."""
        return self.sent + self.took if self.sent is not None else self.at


def read_lines(path: Path) -> list[dict[str, Any]]:
    """A journal's events; a last line cut by a SIGKILL is dropped."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def read_journals(journal_dir: Path) -> dict[str, Any]:
    """Everything the clients and the task producer said, folded per operation and per item."""
    fold = _Fold()
    for path in sorted(journal_dir.glob("journal-*.jsonl")):
        fold.client_journal(path)
    tasks_path = journal_dir / "tasks.jsonl"
    fold.task_journal(read_lines(tasks_path) if tasks_path.exists() else [])
    return fold.result()


class _Fold:
    """The journals read so far; ``result()`` is what ``read_journals`` returns."""

    def __init__(self) -> None:
        self.figures: dict[str, OpFigures] = collections.defaultdict(OpFigures)
        self.intents: dict[str, str] = {}  # uid -> queue, every push attempted
        self.confirmed: dict[str, str] = {}  # uid -> item id of a push that answered 200/201
        self.in_doubt: set[str] = set()  # pushes whose answer never came
        self.consumed: list[tuple[str, str, str]] = []  # (uid, how, item id): pops and acks answered
        self.acked_ids: list[str] = []
        self.ack_doubt: set[str] = set()  # acks whose answer was lost: the item may be gone
        # uid -> (t, journal, abandon)
        self.claims: dict[str, list[tuple[float, str, bool]]] = collections.defaultdict(list)
        self.settled_claims: dict[str, set[tuple[str, float]]] = collections.defaultdict(set)
        self.unexpected: collections.Counter[str] = collections.Counter()
        self.server_errors: list[dict[str, Any]] = []
        self.transport_errors: collections.Counter[str] = collections.Counter()
        self.transport_error_times: list[float] = []
        self.timeline: dict[str, list[Take]] = collections.defaultdict(list)  # uid -> takes, releases, acks
        self.duplicates_answered = 0
        self.task_ids: list[str] = []
        self.enqueue_errors: list[str] = []
        # Of the journal being read: pushes and the ack not answered yet, and each item's last claim.
        self.pending_push: set[str] = set()
        self.pending_ack: str | None = None
        self.last_claim: dict[str, float] = {}

    def client_journal(self, path: Path) -> None:
        """One client thread's journal: intents (``op?`` lines) and answers, in order."""
        source = path.stem.removeprefix("journal-")
        self.pending_push, self.pending_ack, self.last_claim = set(), None, {}
        for seq, event in enumerate(read_lines(path)):
            if not self._intent(source, seq, event):
                self._answer(source, seq, event)
        if self.pending_ack is not None:  # the journal ends between an ack and its answer: killed
            self.ack_doubt.add(self.pending_ack)
        self.in_doubt.update(self.pending_push)

    def _intent(self, source: str, seq: int, event: dict[str, Any]) -> bool:
        """Fold a line written before its request was sent; False if the line is an answer."""
        op = event["op"]
        if op == "push?":
            self.intents[event["uid"]] = event["q"]
            self.pending_push.add(event["uid"])
        elif op == "batch?":
            for uid in event["uids"]:
                self.intents[uid] = event["q"]
                self.pending_push.add(uid)
        elif op == "ack?":
            self.pending_ack = event["uid"]
        elif op == "release?":
            # From the moment it is sent, the item may be free again, answered or not.
            self.timeline[event["uid"]].append(Take(event["t"], 0.0, 0.0, source, "release", seq, sent=event["t"]))
        else:
            return False
        return True

    def _answer(self, source: str, seq: int, event: dict[str, Any]) -> None:
        op, status = event["op"], event["st"]
        self.figures[op].add(status, event.get("ms"))
        if status == "err":
            self.transport_errors[f"{op}: {event.get('err')}"] += 1
            self.transport_error_times.append(event["t"])
        elif status >= 500:
            self.server_errors.append(event)
        elif status not in EXPECTED[op]:
            self.unexpected[f"{op} {status}"] += 1
        if op in ("push", "batch"):
            self._pushed(event, status)
        elif op == "pop" and status == 200:
            self.consumed.append((event["uid"], "pop", event["id"]))
            self.timeline[event["uid"]].append(
                Take(event["t"], event["ms"] / 1000, 0.0, source, "pop", seq, sent=event.get("t0"))
            )
        elif op == "claim" and status == 200:
            self.claims[event["uid"]].append((event["t"], source, bool(event.get("abandon"))))
            self.last_claim[event["uid"]] = event["t"]
            self.timeline[event["uid"]].append(
                Take(
                    event["t"],
                    event["ms"] / 1000,
                    event["lease"],
                    source,
                    "claim",
                    seq,
                    sent=event.get("t0"),
                    until=event.get("until"),
                )
            )
        elif op == "ack":
            self._acked(source, seq, event, status)
        elif op == "release" and status != "err" and event["uid"] in self.last_claim:
            self.settled_claims[event["uid"]].add((source, self.last_claim[event["uid"]]))

    def _pushed(self, event: dict[str, Any], status: Any) -> None:
        if event["op"] == "push" and status in (200, 201):
            self.confirmed[event["uid"]] = event["id"]
            self.pending_push.discard(event["uid"])
            self.duplicates_answered += bool(event.get("dup"))
        elif event["op"] == "push" and status != "err":
            self.pending_push.discard(event["uid"])  # refused: nothing stored
        elif event["op"] == "batch":
            if status == 201:
                for uid, item_id in zip(event["uids"], event["ids"]):
                    self.confirmed[uid] = item_id
            if status != "err":
                self.pending_push.difference_update(event["uids"])

    def _acked(self, source: str, seq: int, event: dict[str, Any], status: Any) -> None:
        uid = event["uid"]
        if status == 204:
            self.consumed.append((uid, "ack", event["id"]))
            self.acked_ids.append(event["id"])
            self.pending_ack = None
            self.timeline[uid].append(
                Take(event["t"], event["ms"] / 1000, 0.0, source, "ack", seq, sent=event.get("t0"))
            )
        elif status == 409 and event.get("doubt"):
            self.ack_doubt.add(uid)
            self.pending_ack = None
        elif status != "err":
            self.pending_ack = None
        if status != "err" and uid in self.last_claim:
            self.settled_claims[uid].add((source, self.last_claim[uid]))

    def task_journal(self, events: list[dict[str, Any]]) -> None:
        """The task producer's journal: one line per enqueue, with the task's id or the error."""
        for event in events:
            self.figures["enqueue task"].add(200 if "id" in event else "error", event.get("ms"))
            if "id" in event:
                self.task_ids.append(event["id"])
            else:
                self.enqueue_errors.append(event["error"])

    def result(self) -> dict[str, Any]:
        return {
            "figures": dict(self.figures),
            "intents": self.intents,
            "confirmed": self.confirmed,
            "in_doubt": self.in_doubt - set(self.confirmed),
            "consumed": self.consumed,
            "acked_ids": self.acked_ids,
            "ack_doubt": self.ack_doubt,
            "claims": self.claims,
            "settled_claims": self.settled_claims,
            "timeline": self.timeline,
            "unexpected": self.unexpected,
            "server_errors": self.server_errors,
            "transport_errors": self.transport_errors,
            "transport_error_times": self.transport_error_times,
            "duplicates_answered": self.duplicates_answered,
            "task_ids": self.task_ids,
            "enqueue_errors": self.enqueue_errors,
            "accounting": {},
        }
