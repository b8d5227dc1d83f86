"""A Django Tasks backend on django-fdbqueue's queues: ``@task`` functions run by our workers.

    INSTALLED_APPS += ["django_tasks", "django_fdbqueue"]      # "django_tasks" only before Django 6.0
    TASKS = {"default": {"BACKEND": "django_fdbqueue.tasks.FDBQueueBackend",
                         "QUEUES": ["default", "emails"],
                         "OPTIONS": {"RESULT_RETENTION": 7 * 86400}}}

then ``manage.py fdbqueue worker --tasks`` runs them. ``backend`` is the backend class (the
framework's contract), ``results`` the result records in FoundationDB, ``runner`` what a worker
does with each task; ``compat`` picks ``django.tasks`` or the ``django-tasks`` backport.

Importing this package needs the Tasks framework (Django 6.0+, or the ``tasks`` extra); the rest
of django-fdbqueue does not.
"""

from __future__ import annotations

from .backend import FDBQueueBackend

__all__ = ["FDBQueueBackend"]
