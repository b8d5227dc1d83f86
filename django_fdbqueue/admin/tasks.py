"""The admin's task pages: task queues with their counts, results by status, one result, retry.

They sit beside the queue pages (``__init__`` adds them only when the Tasks framework can be
imported). A task lives in a task queue, one of our queues (``backend.queue_for``), and the
user's access actions on that queue decide: ``view`` to see it, ``consume`` to retry. The pages
read the result records directly (``results``), not through ``TaskResult``, so a record whose task
can no longer be imported is still shown; only the ``FDBQueueBackend`` backends of ``TASKS`` are.

The pages, and who may use them: the admin guide, "Retry failed tasks" (docs/howto/admin.md).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any, cast

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from django_fdbqueue import access, exceptions, service
from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service.records import QueueInfo, to_datetime
from django_fdbqueue.tasks import results
from django_fdbqueue.tasks.compat import InvalidTaskError, TaskResultDoesNotExist
from django_fdbqueue.tasks.queues import accepts_queue, configured_backends, our_backend, task_queue_names

from .pages import AdminPages, store_guard

RESULTS_PER_PAGE = 25
# Counting reads one index key per task; beyond this many a status shows "1000+".
COUNT_LIMIT = 1000
# Result ids are 32 characters (results.new_id); anything much longer is no id.
MAX_ID_LENGTH = 200
CALL_TEXT_LIMIT = 80


# --- what the pages show -----------------------------------------------------------------------


@dataclass
class TaskQueueRow:
    """One task queue of one backend on the overview: result counts and its queue's statistics."""

    backend: str
    name: str
    queue: str | None  # our queue's name; None if the name is not valid under QUEUE_PREFIX
    counts: dict[str, int] = field(default_factory=dict)
    info: QueueInfo | None = None  # None until the queue exists (created on first use)

    @property
    def count_cells(self) -> list[tuple[str, str]]:
        """(status, shown count) in status order; a count at the limit reads "1000+"."""
        return [(status, _count_text(self.counts.get(status, 0))) for status in results.STATUSES]


class ResultRow:
    """A result record as the pages show it: datetimes instead of microseconds, short texts."""

    def __init__(self, record: results.Record) -> None:
        self.record = record
        self.id = record.id
        self.status = record.status
        self.attempts = len(record.worker_ids)  # one worker id per attempt, as TaskResult counts
        self.task_name = record.task_path.rpartition(".")[2]
        self.call_text = call_text(record.args, record.kwargs)
        self.last_error_class = record.errors[-1].get("exception_class_path") if record.errors else None
        self.has_return_value = record.status == results.SUCCESSFUL
        self.enqueued_at = _moment(record.enqueued_us)
        self.started_at = _moment(record.started_us)
        self.finished_at = _moment(record.finished_us)
        self.last_attempted_at = _moment(record.last_attempted_us)
        self.run_after = _moment(record.run_after_us)
        self.expires_at = _moment(record.expires_us)


def _moment(micros: int | None) -> dt.datetime | None:
    return None if micros is None else to_datetime(micros)


def _count_text(count: int) -> str:
    return f"{COUNT_LIMIT}+" if count >= COUNT_LIMIT else str(count)


def call_text(args: list[Any], kwargs: dict[str, Any], limit: int = CALL_TEXT_LIMIT) -> str:
    """The arguments as one short line, ``1, "a", to="x"``: enough to tell rows apart."""
    parts = [json.dumps(value, ensure_ascii=False) for value in args]
    parts += [f"{name}={json.dumps(value, ensure_ascii=False)}" for name, value in kwargs.items()]
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@transactional
def _read_overview(tr: Any, rows: list[TaskQueueRow]) -> None:
    """Fill in every row's counts and queue statistics, from one snapshot."""
    for row in rows:
        row.counts = results.counts(tr, row.backend, row.name, COUNT_LIMIT)
        if row.queue is not None:
            try:
                row.info = service.get_queue(tr, row.queue)
            except exceptions.QueueNotFound:
                row.info = None


@transactional
def _read_results(
    tr: Any, backend: str, queue_name: str, queue: str, status: str, after: tuple[Any, ...] | None, limit: int
) -> tuple[list[results.Record], tuple[Any, ...] | None, dict[str, int], bool]:
    """One page of a queue's results in one status, the counts for the tabs, and whether our
    queue exists yet (one snapshot)."""
    records, last = results.page(tr, backend, queue_name, status, after, limit)
    return records, last, results.counts(tr, backend, queue_name, COUNT_LIMIT), service.queue_exists(tr, queue)


# --- the query string of the results page --------------------------------------------------------


def encode_cursor(position: tuple[Any, ...]) -> str:
    """The position after which the next page starts, as it travels in the query string."""
    enqueued_us, result_id = position
    return f"{enqueued_us}.{result_id}"


def decode_cursor(text: str) -> tuple[int, str] | None:
    """The position a cursor names, or None if it is not one of ours."""
    micros, dot, result_id = text.partition(".")
    if not dot or not micros.isdigit() or not result_id or len(result_id) > MAX_ID_LENGTH or len(micros) > 20:
        return None
    return int(micros), result_id


class ResultsQueryForm(forms.Form):
    """The results page's query string: which status tab, and where the page starts."""

    status = forms.ChoiceField(choices=[(s, s) for s in results.STATUSES], required=False)
    after = forms.CharField(required=False, max_length=MAX_ID_LENGTH + 30)

    def clean_status(self) -> str:
        return self.cleaned_data.get("status") or results.READY


# --- the views ---------------------------------------------------------------------------------


class TaskAdminViews(AdminPages):
    """The task pages; they share the queue pages' helpers (permissions, addresses, error pages)."""

    @store_guard
    def tasks(self, request: HttpRequest) -> HttpResponse:
        """Every task queue of every FDBQueueBackend, with how many results each status holds."""
        self.require(request, "view")
        configured = configured_backends()
        db = get_database()
        rows: list[TaskQueueRow] = []
        for alias, backend in configured.ours.items():
            for name in task_queue_names(db, backend):
                try:
                    queue: str | None = backend.queue_for(name)
                except InvalidTaskError:
                    queue = None  # reported by the system checks (E101); nothing to read
                if self._may_on(request, "view", queue):
                    rows.append(TaskQueueRow(backend=alias, name=name, queue=queue))
        _read_overview(db, rows)
        context = self.context(
            request,
            "Tasks",
            rows=rows,
            statuses=results.STATUSES,
            backends=sorted(configured.ours),
            other_backends=configured.others,
            broken_backends=configured.broken,
            count_limit=COUNT_LIMIT,
            tasks_url=self.url("tasks"),
        )
        return self.render(request, "tasks_list.html", context)

    @store_guard
    def task_list(self, request: HttpRequest, backend: str, queue_name: str) -> HttpResponse:
        """One task queue's results in one status (a tab each), oldest enqueued first, paged."""
        self.require(request, "view")
        task_backend = our_backend(backend)
        if task_backend is None or not accepts_queue(task_backend, queue_name):
            raise Http404(f"No task queue {queue_name!r} in an FDBQueueBackend TASKS[{backend!r}].")
        self._require_on(request, "view", self._queue_of(task_backend, queue_name))
        query = ResultsQueryForm(request.GET)
        status, after = results.READY, None
        if query.is_valid():
            status = query.cleaned_data["status"]
            if query.cleaned_data["after"]:
                after = decode_cursor(query.cleaned_data["after"])
                if after is None:
                    messages.warning(request, "That page link is not valid; showing the first page.")
        queue = task_backend.queue_for(queue_name)
        records, last, counts, queue_exists = _read_results(
            get_database(), backend, queue_name, queue, status, after, RESULTS_PER_PAGE
        )
        rows = [ResultRow(record) for record in records]

        def page_url(status_name: str, cursor: str = "") -> str:
            return self.url("task_list", backend, queue_name, status=status_name, after=cursor)

        tabs = [(name, _count_text(counts.get(name, 0)), page_url(name)) for name in results.STATUSES]
        context = self.context(
            request,
            f"Tasks in {queue_name}",
            backend=backend,
            queue_name=queue_name,
            queue=queue,
            queue_exists=queue_exists,
            queue_url=self.url("change", queue),
            status=status,
            tabs=tabs,
            rows=rows,
            first_page_url=page_url(status) if after else None,
            next_page_url=page_url(status, encode_cursor(last)) if last else None,
            tasks_url=self.url("tasks"),
        )
        return self.render(request, "task_results.html", context)

    @store_guard
    def task_detail(self, request: HttpRequest, result_id: str) -> HttpResponse:
        """One result: arguments, return value, every error with its traceback, workers, times."""
        self.require(request, "view")
        record = self._record(result_id)
        backend = our_backend(record.backend)
        queue = self._queue_of(backend, record.queue_name)
        self._require_on(request, "view", queue)
        row = ResultRow(record)
        context = self.context(
            request,
            f"Task {record.id}",
            result=row,
            backend_known=backend is not None,
            list_url=(
                self.url("task_list", record.backend, record.queue_name, status=record.status)
                if backend is not None and accepts_queue(backend, record.queue_name)
                else None
            ),
            retry_url=self.url("task_retry", record.id),
            can_retry=(
                self._may_on(request, "consume", queue) and backend is not None and record.status == results.FAILED
            ),
            tasks_url=self.url("tasks"),
        )
        return self.render(request, "task_detail.html", context)

    @store_guard
    def task_retry(self, request: HttpRequest, result_id: str) -> HttpResponse:
        """Put a FAILED task back in its queue (READY again, its errors and worker ids kept)."""
        self.require(request, "consume")
        record = self._record(result_id)
        backend = our_backend(record.backend)
        queue = self._queue_of(backend, record.queue_name)
        self._require_on(request, "consume", queue)
        back = self.url("task_detail", record.id)
        if request.method != "POST":
            return HttpResponseRedirect(back)
        if backend is None:
            messages.error(
                request,
                f"TASKS[{record.backend!r}] is not an FDBQueueBackend in these settings "
                "any more, so nothing would run this task; nothing was changed.",
            )
            return HttpResponseRedirect(back)
        if not accepts_queue(backend, record.queue_name):
            messages.error(
                request,
                f"The queue {record.queue_name!r} is no longer one of "
                f"TASKS[{record.backend!r}]['QUEUES']; nothing was changed.",
            )
            return HttpResponseRedirect(back)
        try:
            backend.retry(record.id)
        except TaskResultDoesNotExist:
            raise Http404("This task result no longer exists.") from None
        except InvalidTaskError as error:  # someone retried it first, or it finished meanwhile
            messages.error(request, f"{error} Nothing was changed.")
            return HttpResponseRedirect(back)
        self.audit(request, "consume", queue or "*", operation="task_retry", task=record.id)
        messages.success(
            request,
            f"The task {record.task_path} is queued again in “{record.queue_name}”: "
            "READY, with its earlier errors kept.",
        )
        return HttpResponseRedirect(back)

    @staticmethod
    def _queue_of(backend: Any, queue_name: str) -> str | None:
        """Our queue behind a task queue, or None when that cannot be told (no such backend now,
        or a name not valid under its prefix)."""
        if backend is None:
            return None
        try:
            return cast(str, backend.queue_for(queue_name))
        except InvalidTaskError:
            return None

    def _may_on(self, request: HttpRequest, action: str, queue: str | None) -> bool:
        """``action`` on ``queue``; on every queue when the queue cannot be told."""
        if queue is None:
            return access.can_every(request.user, action)
        return self.may(request, action, queue)

    def _require_on(self, request: HttpRequest, action: str, queue: str | None) -> None:
        """``require_on`` the task's queue; ``action`` on every queue when it cannot be told."""
        if queue is None:
            self.require_every(request, action)
        else:
            self.require_on(request, action, queue)

    def _record(self, result_id: str) -> results.Record:
        """The stored result, or 404."""
        if not result_id or len(result_id) > MAX_ID_LENGTH:
            raise Http404("No such task result.")
        record = results.get(get_database(), result_id)
        if record is None:
            raise Http404("No such task result (it may have been forgotten after its retention).")
        return record
