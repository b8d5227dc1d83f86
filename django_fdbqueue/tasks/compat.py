"""The Tasks framework's names, from Django itself (6.0+) or from the django-tasks backport.

One backend serves both: Django 6.0 ships the framework as ``django.tasks``; before it, the
``django-tasks`` package (0.12, whose contract Django 6.0 adopted) provides the same names. Where
the two spell one differently (the backport's ``InvalidTaskError`` is Django's ``InvalidTask``),
this module gives the backport's name. The four small helpers at the end are the app's own, with
the backport's behaviour, so that nothing here leans on either framework's private utilities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from traceback import format_exception
from typing import TYPE_CHECKING, Any

from django.utils.crypto import get_random_string

# Type-checked against the backport, which ships its own types: django-stubs describe Django 6.0's
# django.tasks, whose names differ (InvalidTask), and one name cannot have both types.
if TYPE_CHECKING:
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
else:
    try:  # Django 6.0 and later
        from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
        from django.tasks.exceptions import InvalidTask as InvalidTaskError
        from django.tasks.exceptions import TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
    except ImportError:  # the backport
        from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
        from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started

__all__ = [
    "BaseTaskBackend",
    "InvalidTaskError",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "get_exception_traceback",
    "get_module_path",
    "get_random_id",
    "normalize_json",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


def normalize_json(obj: Any) -> Any:
    """``obj`` as JSON would give it back (mappings, lists, str, numbers, bools, None); bytes are
    read as UTF-8; anything else is a TypeError (a ValueError for bytes that are not UTF-8)."""
    if isinstance(obj, Mapping):
        return {normalize_json(key): normalize_json(value) for key, value in obj.items()}
    if isinstance(obj, bytes):
        try:
            return obj.decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"Unsupported value: {type(obj)}") from error
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    if isinstance(obj, Sequence):
        return [normalize_json(value) for value in obj]
    raise TypeError(f"Unsupported type: {type(obj)}")


def get_module_path(value: Any) -> str:
    """The dotted path a task or exception class is imported by."""
    return f"{value.__module__}.{value.__qualname__}"


def get_exception_traceback(exc: BaseException) -> str:
    return "".join(format_exception(exc))


def get_random_id() -> str:
    """A random id for a task result or a worker: 32 characters (the framework allows 64)."""
    return get_random_string(32)
