"""Django settings of the process that measures django-tasks' database backend for the bench.

That process (:mod:`~benchmarks.tasks_db_child`) is a world of its own: the user's
project, its database, its ``TASKS`` and its apps play no part, so the reference costs what the
database backend costs in a project of nothing else. Its one database is a SQLite file in a
temporary directory the bench removes afterwards, named by :data:`DATABASE_ENV`; every connection
to it sets ``journal_mode=WAL`` and ``synchronous=NORMAL``: the durability of the embedded
engine's own file and of the bench's raw SQLite reference. The connection is persistent
(``CONN_MAX_AGE = None``): with Django's default of 0 the worker, which closes old connections
around every task as a request would, opens a new one for each task, and closing the last
connection to a WAL file checkpoints it; that would measure this process's setup (nothing else
holds the file open), not the backend, and make the reference slower than it is in a project.

In that process the bench's task alias names the database backend, so the task it runs is the
very task the rows of ours run (:func:`benchmarks.tasks.echo`), on the same queue name.
"""

from __future__ import annotations

import importlib.util
import os

from django_fdbqueue.bench.task_names import BACKEND_ALIAS, QUEUE_NAME

#: The environment variable that names the SQLite file, set by the bench for its child.
DATABASE_ENV = "FDBQUEUE_BENCH_TASKS_DB"
#: What each connection runs first (Django 5.1+ reads ``init_command`` for SQLite).
PRAGMAS = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"

SECRET_KEY = "fdbqueue-bench-tasks-db"  # nothing is signed in this process
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Django 6.0+ has the Tasks framework itself; before, the django-tasks backport is an app.
_BACKPORT = importlib.util.find_spec("django.tasks") is None
INSTALLED_APPS = [*(["django_tasks"] if _BACKPORT else []), "django_tasks_db"]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get(DATABASE_ENV, ""),
        "OPTIONS": {"init_command": PRAGMAS},
        "CONN_MAX_AGE": None,
    }
}

TASKS = {
    BACKEND_ALIAS: {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": [QUEUE_NAME]},
}
