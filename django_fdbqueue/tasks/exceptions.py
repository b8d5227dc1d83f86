"""The Tasks backend's own errors, each also one of the classes callers already catch.

``InvalidTaskArguments`` is both the framework's ``InvalidTaskError`` (what this backend raised
first) and ``TypeError`` (what the framework's contract, and Django 6's ``django.tasks``, raise
for arguments that are not JSON), so code written against either keeps working.
``ResultTooLarge`` is recorded as a task's error, never raised to a caller: its class path and
message are what a FAILED result shows when the return value could not be stored.
Workflows (``workflows``) raise ``InvalidWorkflow`` for a graph or step they refuse and
``WorkflowDoesNotExist`` for an unknown id; ``WorkflowCancelled`` and ``WorkflowFailed`` are
recorded, like ``ResultTooLarge``, as the error of a member that never ran.
"""

from __future__ import annotations

from django_fdbqueue.exceptions import ValueTooLarge

from .compat import InvalidTaskError

__all__ = [
    "InvalidTaskArguments",
    "ArgumentsTooLarge",
    "InvalidLimitKey",
    "ResultTooLarge",
    "InvalidWorkflow",
    "WorkflowDoesNotExist",
    "MemberNotRun",
    "WorkflowCancelled",
    "WorkflowFailed",
]


class InvalidTaskArguments(InvalidTaskError, TypeError):
    """Task arguments that do not survive a trip through JSON (or keyword names that are not strings)."""


class ArgumentsTooLarge(InvalidTaskError, ValueError):
    """Task arguments too large for the task's result record (one FoundationDB value)."""


class InvalidLimitKey(InvalidTaskError, ValueError):
    """A task's limit-key argument (the ``LIMIT_KEY_ARG`` option) that is not a valid limit key."""


class ResultTooLarge(ValueTooLarge):
    """A return value too large for the task's result record: the task is FAILED with this error."""

    code = "result_too_large"
    default_message = "The task's return value is too large to store."


class InvalidWorkflow(InvalidTaskError, ValueError):
    """A workflow refused before anything is stored: a bad step, graph, option or backend."""


class WorkflowDoesNotExist(LookupError):
    """No workflow of that id in that backend (never enqueued, or forgotten after its retention)."""


class MemberNotRun(Exception):
    """Recorded, never raised to a caller: a workflow member that will never run (its record is
    FAILED with this error, so it is finished and forgotten after the retention like any result)."""


class WorkflowCancelled(MemberNotRun):
    """The member's workflow was cancelled before the member started."""


class WorkflowFailed(MemberNotRun):
    """Another member failed under ``on_failure="fail"`` before this one started."""
