"""Keeping a task's result record within one FoundationDB value (100,000 bytes).

A record that does not fit cannot be written at all (error 2103), and a finishing transaction
that fails that way would leave the task RUNNING and its item unacknowledged, to be run again
on every delivery. So every write of a record that can grow is made to fit first:

* at enqueue, the arguments may fill the record only up to :data:`RUN_ROOM` bytes short of the
  limit, so its runs have room for their worker ids and an error (``ArgumentsTooLarge``);
* a return value that does not fit makes the task FAILED with a ``ResultTooLarge`` error (the
  runner's choice; see :func:`result_too_large`);
* errors are shortened to fit, longest traceback first (its start and its end, where the
  exception's message is, are kept), then the oldest errors are dropped.
"""

from __future__ import annotations

import dataclasses
import json

from django_fdbqueue.service import MAX_VALUE_BYTES

from .exceptions import ArgumentsTooLarge, ResultTooLarge
from .results import Record

__all__ = ["MAX_RECORD_BYTES", "RUN_ROOM", "size", "fits", "check_new", "result_too_large", "fitted"]

#: A record is one value.
MAX_RECORD_BYTES = MAX_VALUE_BYTES
#: Bytes a new record leaves free for what its runs add (worker ids, errors).
RUN_ROOM = 10_000
#: Characters kept of a traceback that has to be shortened.
MIN_TRACEBACK_CHARS = 2_000
_CUT = "\n[... {cut:,} characters cut: a task's result record holds at most {limit:,} bytes ...]\n"
_CUT_ROOM = 120  # at least len(_CUT) once formatted


def size(record: Record) -> int:
    """Bytes the record takes as stored."""
    return len(record.dumps())


def fits(record: Record) -> bool:
    return size(record) <= MAX_RECORD_BYTES


def check_new(record: Record) -> None:
    """Refuse a new task whose arguments leave its runs no room (ArgumentsTooLarge)."""
    allowed = MAX_RECORD_BYTES - RUN_ROOM
    stored = size(record)
    if stored > allowed:
        raise ArgumentsTooLarge(
            f"Task arguments are too large: with them the task's result record is {stored:,} bytes, and at "
            f"most {allowed:,} are allowed (one FoundationDB value holds {MAX_RECORD_BYTES:,} bytes, of which "
            f"{RUN_ROOM:,} stay free for the task's runs). Pass a reference to the data (a primary key, a "
            "file name) instead."
        )


def result_too_large(record: Record) -> ResultTooLarge:
    """The error a FAILED task records when its return value made ``record`` too large to store."""
    value_bytes = len(json.dumps(record.return_value, separators=(",", ":")))
    stored = size(record)
    return ResultTooLarge(
        f"The task returned {value_bytes:,} bytes of JSON: its result record would be {stored:,} bytes, "
        f"over the limit of {MAX_RECORD_BYTES:,} (one FoundationDB value, shared with the task's arguments "
        "and errors). The return value was not stored. Store large results elsewhere (a file, a model) "
        "and return a reference to them.",
        size=stored,
        limit=MAX_RECORD_BYTES,
    )


def fitted(record: Record) -> Record:
    """``record``, its errors shortened (longest traceback first, then oldest dropped) until it fits.

    A record that only its arguments and worker ids make too large is returned as it is.
    """
    if fits(record):
        return record
    errors = [dict(error) for error in record.errors]
    for index in sorted(range(len(errors)), key=lambda i: -len(errors[i].get("traceback", ""))):
        excess = _size_with(record, errors) - MAX_RECORD_BYTES
        if excess <= 0:
            break
        text = errors[index].get("traceback", "")
        # Each character cut frees at least one byte; the marker costs at most _CUT_ROOM.
        keep = max(MIN_TRACEBACK_CHARS, len(text) - excess - _CUT_ROOM)
        if keep < len(text):
            errors[index]["traceback"] = _shortened(text, keep)
    while len(errors) > 1 and _size_with(record, errors) > MAX_RECORD_BYTES:
        errors.pop(0)  # the oldest run's error: the newest says why the task is FAILED now
    return dataclasses.replace(record, errors=errors)


def _size_with(record: Record, errors: list[dict[str, str]]) -> int:
    return size(dataclasses.replace(record, errors=errors))


def _shortened(text: str, keep: int) -> str:
    """The start and the end of ``text`` (``keep`` characters in all), and how much was cut."""
    head = keep // 3
    tail = keep - head
    marker = _CUT.format(cut=len(text) - keep, limit=MAX_RECORD_BYTES)
    return text[:head] + marker + text[len(text) - tail :]
