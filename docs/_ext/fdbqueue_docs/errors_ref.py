"""reference/errors.md: every error code, with what the REST API and the command line make of it.

The service's errors are the classes of ``django_fdbqueue.exceptions``. For each one an instance
is handed to the API's one exception handler and raised inside the command line's
``exit_codes()``: the status, body fields and exit code shown are what those return, not a copy.
The same is done for the errors only the API has (validation, authentication, the store).
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from . import markdown as md


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The handler logs a 500 with its traceback: not wanted in the docs build's output."""
    logger = logging.getLogger(name)
    old, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = old


def rest(exc: Exception) -> tuple[int, dict[str, Any]]:
    """(status, body) the API answers for ``exc``; headers it sets count as body extras."""
    from django_fdbqueue.api.exceptions import exception_handler

    with _quiet("django_fdbqueue.api"):
        response = exception_handler(exc, {})
    body = dict(response.data)
    for header in ("Retry-After",):
        if response.has_header(header):
            body[f"header {header}"] = response[header]
    return response.status_code, body


def cli(exc: Exception) -> str:
    """The command line's exit code for ``exc`` raised by a subcommand."""
    from django.core.management.base import CommandError

    from django_fdbqueue.cli.errors import exit_codes

    try:
        with exit_codes():
            raise exc
    except CommandError as error:
        return str(error.returncode)
    except Exception:  # not one the command line maps: it cannot reach it
        return "—"


def _extras(body: dict[str, Any]) -> str:
    fields = [
        f"{md.code(k)}: {md.code(json.dumps(v))}"
        if not k.startswith("header ")
        else f"header {md.code(k.split(' ', 1)[1])}"
        for k, v in body.items()
        if k not in ("detail", "code", "errors")
    ]
    return "; ".join(fields)


def service_rows() -> list[list[str]]:
    from django_fdbqueue import exceptions

    rows = []
    for name in exceptions.__all__:
        cls = getattr(exceptions, name)
        status, body = rest(cls())
        base = cls.__mro__[1].__name__
        meaning = md.prose(cls.__doc__ if cls.__doc__ != cls.__mro__[1].__doc__ else None) or md.text(
            cls.default_message
        )
        extras = _extras(body)
        rows.append(
            [
                md.code(cls.code),
                md.code(name) + (f" ({md.code(base)})" if base != "Exception" else ""),
                f"{status}" + (f"; {extras}" if extras else ""),
                cli(cls()),
                meaning,
            ]
        )
    return rows


def _api_only_cases() -> list[tuple[str, Callable[[], Exception], Callable[[], Exception] | None]]:
    """(when, the exception the API sees, the one the command line sees if it can meet it)."""
    from django.core.exceptions import RequestDataTooBig
    from rest_framework import exceptions as drf

    from django_fdbqueue.api.exceptions import TOO_LARGE_FDB_ERRORS, DatabaseUnavailable
    from django_fdbqueue.cli.errors import StoreUnavailable
    from django_fdbqueue.fdbapi import make_error

    return [
        (
            "A body that does not validate (a field's type or range, a missing or unknown field)",
            lambda: drf.ValidationError({"priority": ["A valid integer is required."]}),
            None,
        ),
        ("A body that is not JSON", drf.ParseError, None),
        ("A body over the project's DATA_UPLOAD_MAX_MEMORY_SIZE", RequestDataTooBig, None),
        (
            "FoundationDB refuses the transaction as too large (errors "
            f"{', '.join(map(str, sorted(TOO_LARGE_FDB_ERRORS)))}; here {min(TOO_LARGE_FDB_ERRORS)})",
            lambda: make_error(min(TOO_LARGE_FDB_ERRORS)),
            lambda: make_error(min(TOO_LARGE_FDB_ERRORS)),
        ),
        (
            "The store timed out, kept conflicting or is unreachable (here error 1031)",
            lambda: make_error(1031),
            lambda: make_error(1031),
        ),
        (
            "The store cannot be opened (settings, client library, file permissions)",
            DatabaseUnavailable,
            lambda: StoreUnavailable("cannot open"),
        ),
        ("No credentials", drf.NotAuthenticated, None),
        ("Wrong credentials", drf.AuthenticationFailed, None),
        ("Not allowed by FDBQUEUE['PERMISSION_CLASSES']", drf.PermissionDenied, None),
        ("The project's throttle rates", lambda: drf.Throttled(wait=1), None),
        ("A bug: logged, answered without a traceback", lambda: RuntimeError("boom"), None),
    ]


def api_rows() -> list[list[str]]:
    rows = []
    for when, make, make_for_cli in _api_only_cases():
        status, body = rest(make())
        extras = _extras(body)
        rows.append(
            [
                md.code(body["code"]),
                f"{status}" + (f"; {extras}" if extras else ""),
                cli(make_for_cli()) if make_for_cli else "—",
                md.text(when),
            ]
        )
    return rows


def render() -> str:
    return "\n".join(
        [
            "## Errors of the service\n",
            "Every refusal of the service is a `django_fdbqueue.exceptions.QueueError` subclass with a "
            "stable `code`; the REST API answers it with that `code` in the body, the command line "
            "with its exit code and a one-line message.\n",
            md.table(
                ["Code", "Python exception", "REST status; extra body fields", "CLI exit", "Meaning"], service_rows()
            ),
            "## Errors of the REST API and the store\n",
            "Codes only the REST API's answers carry, and what a store failure becomes in each face.\n",
            md.table(["Code", "REST status; extra body fields", "CLI exit", "When"], api_rows()),
        ]
    )
