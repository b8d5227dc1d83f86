"""Exit codes, and how each kind of failure becomes one.

Scripts branch on the exit code, so each code means one thing:

* 0 - done;
* 1 - nothing there: a pop or peek found the queue empty (like ``grep`` finding no line);
* 2 - bad input: unknown queue, invalid name, value, priority, cursor or option, wrong queue kind,
  a refused or declined confirmation, a receipt whose lease is gone (the message starts with
  "Lease gone (expired)" or "Lease gone (not_found)", whichever code the service raised);
* 3 - the store failed: a FoundationDB error (timeout, unreachable cluster, retries exhausted) or
  a database that cannot be opened. A change may or may not have been applied.

Every failure is a ``CommandError`` with that ``returncode``, so Django prints its one-line
message on standard error, without a traceback (unless ``--traceback`` is given).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from django.core.management.base import CommandError

from django_fdbqueue.exceptions import LeaseGone, QueueError
from django_fdbqueue.fdbapi import FDBError, describe

EXIT_OK = 0
EXIT_EMPTY = 1
EXIT_USAGE = 2
EXIT_STORE = 3

# FoundationDB's size limits (transaction, key, value): the input is too large, retrying cannot help.
TOO_LARGE_FDB_ERRORS = frozenset({2101, 2102, 2103})

__all__ = [
    "EXIT_OK",
    "EXIT_EMPTY",
    "EXIT_USAGE",
    "EXIT_STORE",
    "StoreUnavailable",
    "nothing_there",
    "usage_error",
    "exit_codes",
]


class StoreUnavailable(Exception):
    """The database handle could not be opened (settings, client library, file permissions)."""


def usage_error(message: str) -> CommandError:
    """The error to raise for input the command refuses (exit code 2)."""
    return CommandError(message, returncode=EXIT_USAGE)


def nothing_there(message: str) -> CommandError:
    """The error to raise when a pop or peek finds nothing (exit code 1)."""
    return CommandError(message, returncode=EXIT_EMPTY)


def store_error(error: FDBError) -> CommandError:
    """A FoundationDB error as exit code 3 (or 2 for a request over FoundationDB's size limits)."""
    code = getattr(error, "code", None)
    reason = describe(error)
    if code in TOO_LARGE_FDB_ERRORS:
        return usage_error(f"The request is too large for one transaction: {reason} (FoundationDB error {code}).")
    return CommandError(
        f"The queue store failed: {reason} (FoundationDB error {code}). Check that it is reachable "
        "and retry; a change this command was making may or may not have been applied.",
        returncode=EXIT_STORE,
    )


@contextmanager
def exit_codes() -> Iterator[None]:
    """Turn the service's and the store's exceptions raised inside into CommandErrors."""
    try:
        yield
    except LeaseGone as error:
        # One wording for both codes: what matters to a script is that the lease is gone.
        raise usage_error(f"Lease gone ({error.reason}): {error}") from error
    except QueueError as error:
        raise usage_error(str(error)) from error
    except FDBError as error:
        raise store_error(error) from error
    except StoreUnavailable as error:
        raise CommandError(str(error), returncode=EXIT_STORE) from error
