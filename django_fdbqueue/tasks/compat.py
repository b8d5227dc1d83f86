"""The Tasks framework's names, from Django itself (6.0+) or from the django-tasks backport.

One backend serves both: Django 6.0 ships the framework as ``django.tasks``; before it, the
``django-tasks`` package (0.12, whose contract Django 6.0 adopted) provides the same names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Type-checked against the backport, which ships its own types: django-stubs describe Django 6.0's
# django.tasks, whose names differ (InvalidTask), and one name cannot have both types.
if TYPE_CHECKING:
    from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import get_exception_traceback, get_module_path, get_random_id, normalize_json
else:
    try:  # Django 6.0 and later
        from django.tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django.tasks.backends.base import BaseTaskBackend
        from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
        from django.tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
        from django.tasks.signals import task_enqueued, task_finished, task_started
        from django.tasks.utils import get_exception_traceback, get_module_path, get_random_id, normalize_json
    except ImportError:  # the backport
        from django_tasks import TaskContext, TaskResult, TaskResultStatus, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, Task, TaskError
        from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
        from django_tasks.signals import task_enqueued, task_finished, task_started
        from django_tasks.utils import get_exception_traceback, get_module_path, get_random_id, normalize_json

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
