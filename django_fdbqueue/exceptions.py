"""Errors raised by the queue service.

Every error a caller can provoke through the service is a :class:`QueueError` carrying a stable
``code`` slug (for machines: the REST layer, logs, client libraries) and a message written for the
person who has to fix the call. They are plain Python exceptions so the service stays usable
outside HTTP; the REST layer maps them to status codes (not found -> 404, already exists or a
lease that is over -> 409, too large -> 413, everything else -> 400). ``docs/reference/names.md`` lists
every code.

Database failures are not wrapped: they stay ``FDBError`` from ``django_fdbqueue.fdbapi`` so the
retry machinery (``transactional`` / ``tr.on_error``) keeps working on them.
"""

from __future__ import annotations

from typing import Any


class QueueError(Exception):
    """Base class: a request the service refuses, with a stable ``code`` and a helpful message."""

    code: str = "queue_error"
    default_message: str = "The queue operation was refused."

    def __init__(self, message: str | None = None, **context: Any) -> None:
        self.message = message or self.default_message
        #: Structured details (queue name, limit, offending value, ...), handy for API payloads.
        self.context = context
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class InvalidArgument(QueueError):
    """An argument has the wrong type or is out of range (limit, n, end, kind, ...)."""

    code = "invalid_argument"
    default_message = "An argument is invalid."


class InvalidQueueName(InvalidArgument):
    code = "invalid_queue_name"
    default_message = "Queue names are 1 to 200 characters of letters, digits, '.', '_' and '-'."


class InvalidPriority(InvalidArgument):
    code = "invalid_priority"
    default_message = "A priority is an integer from -2**63 to 2**63 - 1."


class InvalidValue(InvalidArgument):
    """The value cannot be encoded by the chosen codec (for JSON: not JSON-serializable)."""

    code = "invalid_value"
    default_message = "The value cannot be encoded."


class InvalidCursor(InvalidArgument):
    code = "invalid_cursor"
    default_message = "The cursor is not one this listing handed out; start again without a cursor."


class WrongQueueKind(InvalidArgument):
    """The operation does not apply to this kind of queue (e.g. pop_max on a FIFO queue)."""

    code = "wrong_queue_kind"
    default_message = "This operation does not apply to this kind of queue."


class ValueTooLarge(QueueError):
    code = "value_too_large"
    default_message = "The encoded value is larger than 100,000 bytes."


class QueueNotFound(QueueError):
    code = "queue_not_found"
    default_message = "No queue has this name."


class QueueAlreadyExists(QueueError):
    code = "queue_already_exists"
    default_message = "A queue with this name already exists."


class ItemNotCommitted(QueueError):
    """The id of an item pushed inside a caller's transaction is known only once that commits."""

    code = "item_not_committed"
    default_message = (
        "The item's id is assigned when its transaction commits: commit the transaction, then read the id."
    )


class InvalidReceipt(InvalidArgument):
    """Not a receipt this service handed out, or one of another queue than the one named."""

    code = "invalid_receipt"
    default_message = "This is not a receipt handed out by a claim on this queue."


class LeaseGone(QueueError):
    """The receipt's lease is over, whatever the cause: stop working on the item.

    Callers that only need "is my lease gone?" catch this one class. ``reason`` says why, for
    logs: ``"expired"`` (its time ran out) or ``"not_found"`` (acked, released, claimed again,
    cleared, or its queue re-created). Either way the refused call changed nothing, and the
    item will be (or has been) delivered again.
    """

    code = "lease_gone"
    reason = "gone"
    default_message = "This receipt's lease is over: the item will be delivered again."


class LeaseNotFound(LeaseGone):
    """The receipt's lease is over: acked or released already, or it expired and moved on."""

    code = "lease_not_found"
    reason = "not_found"
    default_message = (
        "This receipt's lease is over: the item was acked or released, or the lease expired and "
        "the item was claimed again or returned to the queue."
    )


class LeaseExpired(LeaseGone):
    """The lease ran out: the holder may no longer ack, release or extend it."""

    code = "lease_expired"
    reason = "expired"
    default_message = "The lease has expired: the item will be delivered again."


class DeadLetterNotFound(QueueError):
    code = "dead_letter_not_found"
    default_message = "The queue has no dead letter with this id."


class InvalidSchedule(InvalidArgument):
    """A schedule's definition is refused: a malformed cron expression, an unknown time zone, ..."""

    code = "invalid_schedule"
    default_message = "The schedule's definition is invalid."


class ScheduleNotFound(QueueError):
    code = "schedule_not_found"
    default_message = "No schedule has this name."


class ScheduleAlreadyExists(QueueError):
    code = "schedule_already_exists"
    default_message = "A schedule with this name already exists."


__all__ = [
    "QueueError",
    "InvalidArgument",
    "InvalidQueueName",
    "InvalidPriority",
    "InvalidValue",
    "InvalidCursor",
    "WrongQueueKind",
    "ValueTooLarge",
    "QueueNotFound",
    "QueueAlreadyExists",
    "ItemNotCommitted",
    "InvalidReceipt",
    "LeaseGone",
    "LeaseNotFound",
    "LeaseExpired",
    "DeadLetterNotFound",
    "InvalidSchedule",
    "ScheduleNotFound",
    "ScheduleAlreadyExists",
]
