"""``FDBQueueBackend``: Django Tasks on the queues, with results stored beside them.

A task's ``queue_name`` maps to one of our priority queues, ``QUEUE_PREFIX + queue_name``,
created on first use; its priority is the item's, workers claim from the ``max`` end, and its
``run_after`` makes the item a delayed one. The item's value is only the result's id: the record
in ``results`` holds the task's path and arguments. ``enqueue`` writes the record and pushes the
item in one transaction, so a retry after ``commit_unknown_result`` never enqueues a task twice;
bad arguments are refused before anything is stored (``limits`` keeps the record within one
value), and ``LIMIT_KEY_ARG`` gives the item its limit key.

How tasks map onto queues, and every refusal: the tasks guide (docs/howto/tasks.md).
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any, Iterable

from django.core import checks
from django.utils import timezone
from django.utils.module_loading import import_string

from django_fdbqueue import service
from django_fdbqueue.connection import get_database
from django_fdbqueue.exceptions import InvalidArgument, InvalidQueueName, QueueAlreadyExists, QueueNotFound
from django_fdbqueue.fdbapi import FDBError, commit_in_doubt, transactional
from django_fdbqueue.service.records import now_micros, to_datetime
from django_fdbqueue.service.extension import check_key, check_name, check_spread
from django_fdbqueue.worker.runner import DEFAULT_LEASE

from . import limits, results
from .compat import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    normalize_json,
    task_enqueued,
)
from .exceptions import InvalidLimitKey, InvalidTaskArguments, WorkflowCancelled, WorkflowFailed

DEFAULT_OPTIONS: dict[str, Any] = {
    # Our queue for the task queue "emails" is QUEUE_PREFIX + "emails".
    "QUEUE_PREFIX": "tasks.",
    # Seconds a finished result is kept; None keeps them until deleted.
    "RESULT_RETENTION": 7 * 86_400,
    # Claims a task may have without finishing (its workers died) before it becomes a dead letter.
    "MAX_ATTEMPTS": None,
    # A worker's lease on a running task. The worker renews it every third of its length while
    # the task runs, so it does not limit how long a task may take: it is how long a task whose
    # worker died waits before another worker runs it. Hence the worker's own default.
    "LEASE": DEFAULT_LEASE,
    # The name of a keyword argument of the tasks whose value becomes the queue item's limit key
    # (see the queues' key_concurrency and key_rate): a string of 1 to 100 bytes of UTF-8, or
    # None or left out for no key; any other value is refused at enqueue. None: no limit keys.
    "LIMIT_KEY_ARG": None,
    # For many task workers on one task queue: each claim takes one of the first CLAIM_SPREAD ready
    # tasks at random (2 to 100; see service.claim's spread), so workers rarely collide, and tasks
    # start in roughly, not exactly, priority order. None: exact order.
    "CLAIM_SPREAD": None,
    # "high-contention" for many task workers on one task queue that must keep exact priority
    # order: claims that meet others are served in rounds (see service.claim's mode). Not with
    # CLAIM_SPREAD or LIMIT_KEY_ARG (a queue with key limits). "plain": one transaction a claim.
    "CLAIM_MODE": "plain",
}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
# The errors of a workflow's member that never ran: such a member is not retried on its own.
_NOT_RUN = {f"{cls.__module__}.{cls.__qualname__}" for cls in (WorkflowCancelled, WorkflowFailed)}


def _micros(moment: dt.datetime) -> int:
    return int(round((moment - _EPOCH).total_seconds() * 1_000_000))


def _moment(micros: int | None) -> dt.datetime | None:
    return None if micros is None else to_datetime(micros)


class FDBQueueBackend(BaseTaskBackend):
    """Run Django tasks through django-fdbqueue's queues (see the tasks guide, docs/howto/tasks.md)."""

    supports_defer = True
    supports_priority = True
    supports_get_result = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        unknown = set(self.options) - set(DEFAULT_OPTIONS)
        self.option_errors: list[str] = [f"unknown option {name!r}" for name in sorted(unknown)]
        merged = {**DEFAULT_OPTIONS, **self.options}
        self.queue_prefix: str = merged["QUEUE_PREFIX"]
        self.retention: float | None = merged["RESULT_RETENTION"]
        self.max_attempts: int | None = merged["MAX_ATTEMPTS"]
        self.lease: float = merged["LEASE"]
        self.limit_key_arg: str | None = merged["LIMIT_KEY_ARG"]
        self.claim_spread: int | None = merged["CLAIM_SPREAD"]
        self.claim_mode: Any = merged["CLAIM_MODE"]
        self._check_options()

    # --- options and queue names ------------------------------------------------------------------

    def _check_options(self) -> None:
        if not isinstance(self.queue_prefix, str):
            self.option_errors.append("QUEUE_PREFIX must be a string")
        if self.retention is not None and not _positive_number(self.retention):
            self.option_errors.append("RESULT_RETENTION must be a positive number of seconds or None")
        if self.max_attempts is not None and (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or not 1 <= self.max_attempts <= service.MAX_ATTEMPTS_LIMIT
        ):
            self.option_errors.append(f"MAX_ATTEMPTS must be None or an integer from 1 to {service.MAX_ATTEMPTS_LIMIT}")
        if not _positive_number(self.lease) or self.lease > service.MAX_LEASE_SECONDS:
            self.option_errors.append(
                f"LEASE must be a number of seconds above 0 and at most {service.MAX_LEASE_SECONDS:g}"
            )
        if self.limit_key_arg is not None and not (
            isinstance(self.limit_key_arg, str) and self.limit_key_arg.isidentifier()
        ):
            self.option_errors.append("LIMIT_KEY_ARG must be None or the name of a keyword argument")
        try:
            check_spread(self.claim_spread)
        except InvalidArgument:
            self.option_errors.append(f"CLAIM_SPREAD must be None or an integer from 2 to {service.MAX_SPREAD}")
        self._check_claim_mode()
        for name in sorted(self.queues):
            try:
                self.queue_for(name)
            except InvalidTaskError as error:
                self.option_errors.append(str(error))

    def _check_claim_mode(self) -> None:
        if self.claim_mode not in ("plain", "high-contention"):
            self.option_errors.append(f"CLAIM_MODE must be 'plain' or 'high-contention', not {self.claim_mode!r}")
        elif self.claim_mode == "high-contention" and self.claim_spread is not None:
            self.option_errors.append(
                "CLAIM_MODE 'high-contention' keeps exact order and CLAIM_SPREAD gives it up: set one"
            )
        elif self.claim_mode == "high-contention" and self.limit_key_arg is not None:
            self.option_errors.append(
                "CLAIM_MODE 'high-contention' does not claim from queues with key limits (LIMIT_KEY_ARG)"
            )

    def queue_for(self, queue_name: str) -> str:
        """Our queue's name for a task queue name."""
        name = f"{self.queue_prefix}{queue_name}"
        try:
            return check_name(name)
        except InvalidQueueName:
            raise InvalidTaskError(
                f"Queue {queue_name!r} gives the queue name {name!r}, which is not valid: names are 1 to "
                "200 characters of letters, digits, '.', '_' and '-'."
            ) from None

    def check(self, **kwargs: Any) -> Iterable[checks.CheckMessage]:
        yield from super().check(**kwargs)
        for message in self.option_errors:
            yield checks.Error(
                f"TASKS[{self.alias!r}] ({type(self).__name__}): {message}.",
                id="fdbqueue.E101",
            )

    # --- the backend contract -----------------------------------------------------------------------

    def validate_task(self, task: Task[Any, Any]) -> None:
        super().validate_task(task)
        self.queue_for(task.queue_name)

    def enqueue(self, task: Task[Any, Any], args: Any, kwargs: Any) -> TaskResult[Any]:
        record = self.new_record(task, args, kwargs)
        key = self.limit_key(record.kwargs)
        run_after = _moment(record.run_after_us)
        enqueue_record(get_database(), record, self.queue_for(task.queue_name), self.max_attempts, run_after, key)
        result = self.to_result(task, record)
        task_enqueued.send(type(self), task_result=result)
        return result

    def new_record(self, task: Task[Any, Any], args: Any, kwargs: Any, result_id: str | None = None) -> results.Record:
        """The READY record of a task about to be enqueued, checked (task, JSON arguments, size,
        limit key), not stored: ``enqueue`` stores it with its item, a workflow with its graph."""
        self.validate_task(task)
        args, kwargs = json_arguments(args, kwargs)
        run_after = task.run_after
        if run_after is not None and timezone.is_naive(run_after):
            run_after = timezone.make_aware(run_after)  # USE_TZ = False: the project's time zone
        record = results.Record(
            id=result_id or results.new_id(),
            task_path=task.module_path,
            backend=self.alias,
            queue_name=task.queue_name,
            priority=task.priority,
            args=args,
            kwargs=kwargs,
            takes_context=task.takes_context,
            run_after_us=None if run_after is None else _micros(run_after),
            enqueued_us=now_micros(),
        )
        limits.check_new(record)
        self.limit_key(kwargs)
        return record

    def get_result(self, result_id: str) -> TaskResult[Any]:
        record = results.get(get_database(), result_id) if isinstance(result_id, str) else None
        if record is None or record.backend != self.alias:
            raise TaskResultDoesNotExist(result_id)
        return self.to_result(self.task_of(record), record)

    def retry(self, result_id: str) -> TaskResult[Any]:
        """Run a FAILED task again: READY, queued anew (its errors and worker ids are kept).

        Safe when a commit's answer is lost: the new enqueue time, chosen once here, marks the
        record as this call's own, so a retry of the transaction after ``commit_unknown_result``
        (1021), or one more run after a timeout (1031), finds its own write and does not refuse
        it as "not FAILED" or queue the task twice.
        """
        db, enqueued_us = get_database(), now_micros()
        try:
            record = _retry(db, result_id, self, enqueued_us)
        except FDBError as error:
            if not commit_in_doubt(error):  # 1021 itself is retried inside; 1031 reaches here
                raise
            record = _retry(db, result_id, self, enqueued_us)  # in doubt: see whether it applied
        return self.to_result(self.task_of(record), record)

    # --- records and results ----------------------------------------------------------------------------

    def task_of(self, record: results.Record) -> Task[Any, Any]:
        """The Task a record names, with the options it was enqueued with."""
        task = import_string(record.task_path)
        if not isinstance(task, Task):
            raise InvalidTaskError(f"{record.task_path!r} is not a task (decorate it with @task).")
        return task.using(
            priority=record.priority,
            queue_name=record.queue_name,
            run_after=_moment(record.run_after_us),
            backend=record.backend,
        )

    def to_result(self, task: Task[Any, Any], record: results.Record) -> TaskResult[Any]:
        result: TaskResult[Any] = TaskResult(
            task=task,
            id=record.id,
            status=TaskResultStatus(record.status),
            enqueued_at=_moment(record.enqueued_us),
            started_at=_moment(record.started_us),
            finished_at=_moment(record.finished_us),
            last_attempted_at=_moment(record.last_attempted_us),
            args=record.args,
            kwargs=record.kwargs,
            backend=record.backend,
            errors=[TaskError(**error) for error in record.errors],
            worker_ids=list(record.worker_ids),
        )
        object.__setattr__(result, "_return_value", record.return_value)
        return result

    def limit_key(self, kwargs: dict[str, Any]) -> str | None:
        """The item's limit key: the ``LIMIT_KEY_ARG`` keyword argument, or None (InvalidLimitKey)."""
        if self.limit_key_arg is None:
            return None
        value = kwargs.get(self.limit_key_arg)
        if value is None:
            return None
        try:
            return check_key(value)
        except InvalidArgument:
            raise InvalidLimitKey(
                f"The task argument {self.limit_key_arg!r} is the limit key (TASKS[{self.alias!r}]['OPTIONS']"
                f"['LIMIT_KEY_ARG']): it must be a string of 1 to {service.KEY_MAX_BYTES} bytes of "
                f"UTF-8, or None for no key; got {_shown(value)}."
            ) from None

    def retention_end(self, now_us: int) -> int | None:
        """When a result finished now may be forgotten (None: never)."""
        return None if self.retention is None else now_us + int(self.retention * 1_000_000)


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f"a string of {len(value.encode('utf-8', 'surrogatepass'))} bytes"
    return f"a value of type {type(value).__name__}"


def json_arguments(args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as stored, or InvalidTaskArguments: they must survive a trip through JSON."""
    try:
        args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        json.dumps([args, kwargs], allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidTaskArguments(f"Task arguments must be JSON-serialisable: {error}") from None
    if any(not isinstance(key, str) for key in kwargs):
        raise InvalidTaskArguments("Task keyword arguments must have string names.")
    return args, kwargs


@transactional
def enqueue_record(
    tr: Any,
    record: results.Record,
    queue: str,
    max_attempts: int | None,
    run_after: dt.datetime | None,
    key: str | None = None,
) -> None:
    """The record and the queue item, together; the queue is created on first use."""
    previous = results.read(tr, record.id)
    if previous is not None:
        return  # an earlier attempt of this very call committed (commit_unknown_result)
    results.write(tr, record, None)
    try:
        service.push(tr, queue, {"result_id": record.id}, record.priority, not_before=run_after, key=key)
    except QueueNotFound:
        ensure_queue(tr, queue, max_attempts)
        service.push(tr, queue, {"result_id": record.id}, record.priority, not_before=run_after, key=key)


@transactional
def _retry(tr: Any, result_id: str, backend: FDBQueueBackend, enqueued_us: int) -> results.Record:
    """The retry's transaction; finding ``enqueued_us`` already stored means an earlier attempt
    of this very call committed (its answer lost), whatever the task's status is by now."""
    record = results.read(tr, result_id)
    if record is None or record.backend != backend.alias:
        raise TaskResultDoesNotExist(result_id)
    if record.enqueued_us == enqueued_us:
        return record
    if record.status != results.FAILED:
        raise InvalidTaskError(f"Only a failed task can be retried; this one is {record.status}.")
    if record.workflow is not None and record.errors and record.errors[-1]["exception_class_path"] in _NOT_RUN:
        raise InvalidTaskError(
            f"This task never ran: it is a member of workflow {record.workflow[0]}, which was cancelled or "
            "failed before the task started. Enqueue a new workflow (or the task alone) to run it."
        )
    if backend.queues and record.queue_name not in backend.queues:
        raise InvalidTaskError(
            f"Queue {record.queue_name!r} is no longer one of TASKS[{backend.alias!r}]['QUEUES']: no worker would run it."
        )
    # A new run: new enqueue time, no start or finish yet; errors and worker ids (the attempts) are kept.
    again = results.Record(
        **{
            **record.__dict__,
            "status": results.READY,
            "started_us": None,
            "finished_us": None,
            "expires_us": None,
            "run_after_us": None,
            "enqueued_us": enqueued_us,
        }
    )
    results.write(tr, again, record)
    queue = backend.queue_for(record.queue_name)
    key = backend.limit_key(record.kwargs)  # the same limit key as its first run
    try:
        service.push(tr, queue, {"result_id": record.id}, record.priority, key=key)
    except QueueNotFound:
        ensure_queue(tr, queue, backend.max_attempts)
        service.push(tr, queue, {"result_id": record.id}, record.priority, key=key)
    return again


def ensure_queue(db_or_tr: Any, queue: str, max_attempts: int | None) -> None:
    """Create a task queue if it does not exist yet (a priority queue: workers take the max end)."""
    try:
        service.create_queue(db_or_tr, queue, "priority", max_attempts=max_attempts)
    except QueueAlreadyExists:
        pass
