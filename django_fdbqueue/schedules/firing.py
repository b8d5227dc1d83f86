"""Firing schedules exactly once, however many schedulers run.

One transaction reads the schedule (an ordinary read), checks that it is due, pushes its item
(``service.push`` joined to the transaction) or enqueues its task (the Tasks backend's
``enqueue_record``, which joins it too), and advances ``next_run``, moving the due entry. Two
schedulers firing one schedule therefore conflict, and the retry finds it advanced; each push
also carries the dedup key ``schedule:<name>:<occurrence_us>``. A target that cannot be fired
uses up its occurrence and records ``"error"`` in a transaction of its own (``_TargetFailed``).

Why each case (a conflict, a commit in doubt, ``run_now``, a failed target, a pushed item's id)
fires exactly once: the docs' data model page, "Periodic schedules"
(docs/explanation/data-model.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from django_fdbqueue import service
from django_fdbqueue.exceptions import ScheduleNotFound
from django_fdbqueue.fdbapi import FDBError, transactional
from django_fdbqueue.service.records import now_micros

from . import model, store
from .model import Schedule

#: Due schedules one ``fire_due`` pass handles at most (it is called again at once while some remain).
FIRE_BATCH = 100


@dataclasses.dataclass
class Fired:
    """What one firing did: the occurrences fired (microseconds), and the last result it stored."""

    name: str
    occurrences: list[int]
    result: dict[str, Any]
    pending: list[Any] = dataclasses.field(default_factory=list, repr=False)


class _TargetFailed(Exception):
    """Raised out of a firing transaction whose target failed, so that none of its writes commit."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result["detail"])
        self.result = result


def dedup_key(name: str, occurrence_us: int) -> str:
    return f"schedule:{name}:{occurrence_us}"


def _push(tr: Any, schedule: Schedule, occurrence_us: int) -> Any:
    target = schedule.target
    return service.push(
        tr, target["queue"], target["value"], target["priority"], dedup_key=dedup_key(schedule.name, occurrence_us)
    )


def _task(tr: Any, schedule: Schedule, result_id: str | None) -> str:
    from .tasks_target import enqueue_in

    return enqueue_in(tr, schedule.target, result_id)


def _fire_targets(
    tr: Any, schedule: Schedule, occurrences: list[int], result_id: str | None = None
) -> tuple[dict[str, Any], list[Any]]:
    """Push or enqueue once per occurrence; the result to store and the pending pushes.

    _TargetFailed, with the error result to store, when the target cannot fire: what it wrote
    in ``tr`` so far (a task's result record, earlier occurrences' items) must not commit."""
    pending: list[Any] = []
    task_ids: list[str] = []
    try:
        for occurrence in occurrences:
            if schedule.target["kind"] == "push":
                pending.append(_push(tr, schedule, occurrence))
            else:
                task_ids.append(_task(tr, schedule, result_id))
    except FDBError:
        raise
    except Exception as error:  # noqa: BLE001 - any reason the target cannot fire is the result
        raise _TargetFailed(
            {"status": "error", "detail": f"{type(error).__name__}: {error}", "item": None, "task_result": None}
        ) from error
    detail = f"fired {len(occurrences)} occurrence(s)"
    return {"status": "ok", "detail": detail, "item": None, "task_result": task_ids[-1] if task_ids else None}, pending


def _result(base: dict[str, Any], now_us: int, fired: int, skipped: bool) -> dict[str, Any]:
    return {**base, "at_us": now_us, "fired": fired, "skipped": skipped}


@transactional
def _fire(tr: Any, name: str, now_us: int, failed: dict[str, Any] | None = None) -> Fired | None:
    """Fire ``name`` if due; given ``failed`` (a target's error result), record it instead of firing."""
    schedule = store.read(tr, name)
    if schedule is None or schedule.paused or schedule.next_run_us is None or schedule.next_run_us > now_us:
        return None  # not due (any more): another scheduler, or our own first attempt, fired it
    occurrences, skipped = model.due_occurrences(schedule, now_us)
    pending: list[Any]
    if occurrences and failed is not None:
        base, pending = failed, []
    elif occurrences:
        base, pending = _fire_targets(tr, schedule, occurrences)
    else:
        base, pending = (
            {
                "status": "skipped",
                "detail": "missed occurrences skipped (catch_up=none)",
                "item": None,
                "task_result": None,
            },
            [],
        )
    result = _result(base, now_us, len(occurrences) if base["status"] == "ok" else 0, skipped)
    store.write(
        tr,
        schedule.replace(
            next_run_us=model.next_after(schedule, now_us),
            last_run_us=occurrences[-1] if occurrences else schedule.last_run_us,
            last_result=result,
        ),
        schedule,
    )
    return Fired(name, occurrences, result, pending)


def fire(db: Any, name: str, now_us: int | None = None) -> Fired | None:
    """Fire ``name`` if it is due at ``now_us`` (default: now): None when it is not due."""
    now_us = now_micros() if now_us is None else now_us
    try:
        fired = _fire(db, model.check_name(name), now_us)
    except _TargetFailed as failure:  # nothing of the target committed: record the error alone
        fired = _fire(db, name, now_us, failure.result)
    if fired is not None:
        _note_item(db, fired, now_us)
    return fired


def fire_due(db: Any, now_us: int | None = None) -> list[Fired]:
    """Fire every schedule due at ``now_us`` (default: now), each in its own transaction."""
    now_us = now_micros() if now_us is None else now_us
    done: list[Fired] = []
    while True:
        names = store.due_names(db, now_us, FIRE_BATCH)
        before = len(done)
        for name in names:
            fired = fire(db, name, now_us)
            if fired is not None:
                done.append(fired)
        if len(names) < FIRE_BATCH or len(done) == before:
            return done  # all seen (or others fire the rest: their next pass finds them)


@transactional
def _run_now(tr: Any, name: str, now_us: int, result_id: str | None, failed: dict[str, Any] | None = None) -> Fired:
    """Fire ``name`` once at ``now_us``; given ``failed`` (a target's error result), record it instead."""
    schedule = store.require(tr, name)
    last = schedule.last_result or {}
    if schedule.last_run_us == now_us and last.get("at_us") == now_us:
        return Fired(name, [now_us], last)  # our own first attempt committed (1021)
    base, pending = (failed, []) if failed is not None else _fire_targets(tr, schedule, [now_us], result_id)
    result = _result(base, now_us, int(base["status"] == "ok"), False)
    store.write(tr, schedule.replace(last_run_us=now_us, last_result=result), schedule)
    return Fired(name, [now_us], result, pending)


def run_now(db: Any, name: str, now_us: int | None = None) -> Fired:
    """Fire ``name`` once now, paused or not, without changing its next run."""
    from .tasks_target import new_result_id

    now_us = now_micros() if now_us is None else now_us
    result_id = new_result_id()
    try:
        fired = _run_now(db, model.check_name(name), now_us, result_id)
    except _TargetFailed as failure:  # nothing of the target committed: record the error alone
        fired = _run_now(db, name, now_us, result_id, failure.result)
    _note_item(db, fired, now_us)
    return fired


def _note_item(db: Any, fired: Fired, now_us: int) -> None:
    """After the commit: write the pushed item's id into the last result, if it is still this one's."""
    if not fired.pending:
        return
    item_id = fired.pending[-1].result(wait=True).id
    fired.result = {**fired.result, "item": item_id}
    try:
        _set_item(db, fired.name, now_us, item_id)
    except ScheduleNotFound:
        pass  # deleted meanwhile


@transactional
def _set_item(tr: Any, name: str, now_us: int, item_id: str) -> None:
    schedule = store.require(tr, name)
    last = schedule.last_result or {}
    if last.get("at_us") == now_us and last.get("item") is None:
        store.write(tr, schedule.replace(last_result={**last, "item": item_id}), schedule)
