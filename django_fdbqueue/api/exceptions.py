"""The API's one exception handler: every error becomes a JSON body with "detail" and "code".

Our views attach it themselves (``QueueViewSet.get_exception_handler``), so the mapping holds
whatever the project's DRF ``EXCEPTION_HANDLER`` is. The service's errors keep their code, with
the status their kind calls for (a queue the user may not see answers as one that does not
exist; a gone lease is a 409 with ``"lease_gone": true``); a store that times out, fails or
cannot be opened is a 503 with Retry-After, since waiting is the client's only remedy; anything
else is a logged 500 without a traceback.

Every code with its status, generated from this handler: docs/reference/errors.md.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from django_fdbqueue.access import QueueAccessDenied
from django_fdbqueue.exceptions import (
    DeadLetterNotFound,
    InvalidCursor,
    InvalidQueueName,
    InvalidReceipt,
    InvalidSchedule,
    LeaseGone,
    QueueAlreadyExists,
    QueueError,
    QueueNotFound,
    ScheduleAlreadyExists,
    ScheduleNotFound,
    ValueTooLarge,
)
from django_fdbqueue.fdbapi import FDBError, describe

logger = logging.getLogger("django_fdbqueue.api")

# Seconds a client should wait before retrying after a 503. Short: most causes (a timed-out or
# conflicting transaction, a recovering cluster) clear within a second or two.
RETRY_AFTER_SECONDS = 1

# FoundationDB's size limits (transaction, key, value): retrying the same request cannot help.
TOO_LARGE_FDB_ERRORS = frozenset({2101, 2102, 2103})

QUEUE_ERROR_STATUS: tuple[tuple[type[QueueError], int], ...] = (
    (QueueNotFound, status.HTTP_404_NOT_FOUND),
    (DeadLetterNotFound, status.HTTP_404_NOT_FOUND),
    (QueueAlreadyExists, status.HTTP_409_CONFLICT),
    (LeaseGone, status.HTTP_409_CONFLICT),
    (ValueTooLarge, status.HTTP_413_REQUEST_ENTITY_TOO_LARGE),
    (InvalidReceipt, status.HTTP_400_BAD_REQUEST),
    (ScheduleNotFound, status.HTTP_404_NOT_FOUND),
    (ScheduleAlreadyExists, status.HTTP_409_CONFLICT),
)


class DatabaseUnavailable(exceptions.APIException):
    """The queue database could not be reached, timed out, or kept conflicting: retry later."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The queue database is unavailable or timed out; retry later."
    default_code = "database_unavailable"

    def __init__(self, detail: str | None = None, *, fdb_error: int | None = None) -> None:
        super().__init__(detail)
        self.fdb_error = fdb_error


class RequestTooLarge(exceptions.APIException):
    """The request body exceeds the project's DATA_UPLOAD_MAX_MEMORY_SIZE."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE allows."
    default_code = "request_too_large"


def queue_error_status(exc: QueueError) -> int:
    """HTTP status of a service error: the specific ones first, every other QueueError is a 400."""
    for error_class, code in QUEUE_ERROR_STATUS:
        if isinstance(exc, error_class):
            return code
    return status.HTTP_400_BAD_REQUEST


def error_code(exc: QueueError) -> str:
    """The service error's stable slug, falling back to its class name if a subclass forgot one."""
    return getattr(exc, "code", None) or type(exc).__name__


def unavailable_response(exc: DatabaseUnavailable) -> Response:
    body: dict[str, Any] = {"detail": str(exc.detail), "code": exc.default_code, "fdb_error": exc.fdb_error}
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    return Response(body, status=exc.status_code, headers=headers)


def flatten_messages(errors: Any, prefix: str = "") -> list[str]:
    """ "field: message" lines from DRF's nested validation errors, for a readable "detail"."""
    if isinstance(errors, dict):
        lines: list[str] = []
        for key, value in errors.items():
            label = prefix if key == "non_field_errors" else (f"{prefix}.{key}" if prefix else str(key))
            lines.extend(flatten_messages(value, label))
        return lines
    if isinstance(errors, list):
        lines = []
        for index, value in enumerate(errors):
            # Lists of messages keep their field's label; lists of nested objects get an index.
            label = f"{prefix}[{index}]" if isinstance(value, (dict, list)) else prefix
            lines.extend(flatten_messages(value, label))
        return lines
    return [f"{prefix}: {errors}" if prefix else str(errors)]


# Field error codes that name the service's own error when they are a request's only problem.
SPECIFIC_FIELD_CODES = frozenset({InvalidQueueName.code, InvalidReceipt.code, InvalidCursor.code, InvalidSchedule.code})


def _error_codes(errors: Any) -> set[str]:
    """Every code in a (nested) DRF error structure."""
    if isinstance(errors, dict):
        return set().union(*(_error_codes(value) for value in errors.values()))
    if isinstance(errors, list):
        return set().union(*(_error_codes(value) for value in errors))
    return {getattr(errors, "code", None) or "invalid"}


def validation_body(exc: exceptions.ValidationError) -> dict[str, Any]:
    """A 400 for invalid input: "invalid", or the one specific code every problem shares (a bad
    queue name in a body answers invalid_queue_name, as it does in a URL; a malformed receipt
    invalid_receipt, as a forged one does; a malformed cursor invalid_cursor)."""
    errors = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
    detail = " ".join(flatten_messages(errors)) or "Invalid input."
    codes = _error_codes(errors)
    code = codes.pop() if len(codes) == 1 and codes <= SPECIFIC_FIELD_CODES else "invalid"
    return {"detail": detail, "code": code, "errors": errors}


def api_error_body(exc: exceptions.APIException, data: Any) -> dict[str, Any]:
    """Reshape DRF's default body ({"detail": ...} or a list) into {"detail", "code"}."""
    detail = exc.detail
    code = getattr(detail, "code", None) or exc.default_code
    if isinstance(data, dict) and "detail" in data:
        body = dict(data)
        body.setdefault("code", code)
        return body
    return {"detail": " ".join(flatten_messages(data)) or str(exc.default_detail), "code": code}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler; the mapping is listed in docs/reference/errors.md."""
    response = _handle(exc, context)
    if response is not None:
        # Like DRF's own handler: an error answer must not commit a project's ATOMIC_REQUESTS work.
        set_rollback()
    return response


def queue_error_body(exc: QueueError) -> dict[str, Any]:
    """{"detail", "code"}; a lease that is gone also says so in one field, whatever the code."""
    body: dict[str, Any] = {"detail": str(exc), "code": error_code(exc)}
    if isinstance(exc, LeaseGone):
        body.update(lease_gone=True, reason=exc.reason)
    return body


def access_denied_response(exc: QueueAccessDenied) -> Response:
    """404 with the not-found body when the user may not see the queue, else 403 naming the action."""
    if not exc.visible:
        not_found = QueueNotFound(f"No queue is named {exc.queue!r}.", name=exc.queue)
        return Response(queue_error_body(not_found), status=status.HTTP_404_NOT_FOUND)
    body = {"detail": str(exc), "code": "permission_denied", "action": exc.action}
    return Response(body, status=status.HTTP_403_FORBIDDEN)


def _handle(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, QueueAccessDenied):
        return access_denied_response(exc)

    if isinstance(exc, QueueError):
        return Response(queue_error_body(exc), status=queue_error_status(exc))

    if isinstance(exc, FDBError) and getattr(exc, "code", None) in TOO_LARGE_FDB_ERRORS:
        body = {
            "detail": f"{describe(exc)}: the request is too large for one transaction.",
            "code": "request_too_large",
            "fdb_error": exc.code,
        }
        return Response(body, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)

    if isinstance(exc, FDBError):
        code = getattr(exc, "code", None)
        logger.warning("FoundationDB error %s (%s) in %s", code, describe(exc), _where(context))
        return unavailable_response(DatabaseUnavailable(fdb_error=code))

    if isinstance(exc, DatabaseUnavailable):
        return unavailable_response(exc)

    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge()

    if isinstance(exc, exceptions.ValidationError):
        return Response(validation_body(exc), status=exc.status_code)

    if isinstance(exc, (exceptions.APIException, Http404, PermissionDenied)):
        response = drf_exception_handler(exc, context)
        if response is not None:
            if isinstance(exc, Http404):
                exc = exceptions.NotFound()
            elif isinstance(exc, PermissionDenied):
                exc = exceptions.PermissionDenied()
            response.data = api_error_body(exc, response.data)
        return response

    # A bug, not the client's fault: log it with its traceback, answer without one.
    logger.error("Unhandled error in %s", _where(context), exc_info=exc)
    return Response(
        {"detail": "Internal server error.", "code": "server_error"},
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


def _where(context: dict[str, Any]) -> str:
    request = context.get("request")
    if request is None:
        return "the queue API"
    return f"{request.method} {request.get_full_path()}"


class WorkflowNotFound(exceptions.NotFound):
    """No workflow of that id in that backend, or one whose task queues the user may not view."""

    default_detail = "No such workflow."
    default_code = "workflow_not_found"
