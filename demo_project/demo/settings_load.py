"""Settings for the reliability runs in ``scripts/reliability/``: the demo's, on a run's own files.

The runs start gunicorn, task workers and their own driver as separate processes; every one of
them reads this module, so they all agree through environment variables:

- ``FDBQUEUE_LOAD_DIR`` (required): the run's directory. The Django database (users, sessions,
  API tokens) and the embedded store live there, never beside the demo's own files.
- ``FDBQUEUE_LOAD_FAULTS``: JSON for ``FDBQUEUE["FAULTS"]`` (the embedded engine's fault
  injection), e.g. ``{"not_committed": 0.02, "unknown_applied": 0.02}``. Unset: no faults.
- ``FDBQUEUE_LOAD_TIMEOUT``: ``FDBQUEUE["TIMEOUT"]`` in seconds (default: the app's).
- ``FDBQUEUE_LOAD_WAIT_BUDGET``: ``FDBQUEUE["WAIT_BUDGET"]``, long polls per server process, or
  ``none`` for no limit (default: the app's).
- ``FDBQUEUE_LOAD_TASK_LEASE``: the tasks backend's ``LEASE`` in seconds, short in runs that kill
  a task worker so that its tasks come back within the run.
- ``FDBQUEUE_LOAD_FAULT_LOG``: a directory where each process writes, when it exits, how many
  faults its engine injected (``faults-<pid>.json``), so a run can show the faults happened.

API tokens (django-rest-knox) are added here when the demo's settings do not have them yet, so
the runs work before and after the demo itself enables them; throttling, if the demo has it, is
switched off.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from .settings import *  # noqa: F401,F403
from .settings import FDBQUEUE, INSTALLED_APPS, REST_FRAMEWORK, TASKS

RUN_DIR = Path(os.environ["FDBQUEUE_LOAD_DIR"])

# A load run measures the server, not the debug toolbar of Django's error pages.
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": RUN_DIR / "db.sqlite3",
        # Many gunicorn threads read tokens and sessions at once; wait for a writer, never fail.
        "OPTIONS": {"timeout": 30},
    }
}

if "knox" not in INSTALLED_APPS:
    INSTALLED_APPS = [*INSTALLED_APPS, "knox"]
_AUTHENTICATION = list(REST_FRAMEWORK.get("DEFAULT_AUTHENTICATION_CLASSES", []))
if "knox.auth.TokenAuthentication" not in _AUTHENTICATION:
    # First, so a request carrying a token is not first offered to the session or basic classes.
    _AUTHENTICATION.insert(0, "knox.auth.TokenAuthentication")
REST_FRAMEWORK = {**REST_FRAMEWORK, "DEFAULT_AUTHENTICATION_CLASSES": _AUTHENTICATION}
# No throttling, whatever the demo configures: the runs measure the queues and their server, and
# all their clients are one user, whom a per-user rate would answer 429 most of the time.
REST_FRAMEWORK.pop("DEFAULT_THROTTLE_CLASSES", None)
REST_FRAMEWORK.pop("DEFAULT_THROTTLE_RATES", None)

_FAULTS = os.environ.get("FDBQUEUE_LOAD_FAULTS")
FDBQUEUE = {
    **FDBQUEUE,
    "ENGINE": "embedded",
    "PATH": RUN_DIR / "fdbqueue.sqlite3",
    "FAULTS": json.loads(_FAULTS) if _FAULTS else None,
}
FDBQUEUE.pop("CLUSTER_FILE", None)  # the embedded engine ignores it; keep the runs' settings plain
if os.environ.get("FDBQUEUE_LOAD_TIMEOUT"):
    FDBQUEUE["TIMEOUT"] = float(os.environ["FDBQUEUE_LOAD_TIMEOUT"])
_WAIT_BUDGET = os.environ.get("FDBQUEUE_LOAD_WAIT_BUDGET")
if _WAIT_BUDGET:
    FDBQUEUE["WAIT_BUDGET"] = None if _WAIT_BUDGET == "none" else int(_WAIT_BUDGET)

_TASK_LEASE = os.environ.get("FDBQUEUE_LOAD_TASK_LEASE")
if _TASK_LEASE:
    TASKS = {
        alias: {**config, "OPTIONS": {**config.get("OPTIONS", {}), "LEASE": float(_TASK_LEASE)}}
        for alias, config in TASKS.items()
    }

# Errors and the app's warnings (store errors, worker back-offs) go to standard error, which the
# runs keep in each process's log file; the console email backend's output goes to stdout.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "django": {"handlers": ["stderr"], "level": "ERROR"},
        "django_fdbqueue": {"handlers": ["stderr"], "level": "INFO"},
    },
}


def _write_fault_counts() -> None:
    """On exit, leave this process's injected-fault counts where the run's driver finds them."""
    from django_fdbqueue import connection

    database = connection._database  # only if this process opened the store
    injector = getattr(database, "faults", None)
    if injector is None:
        return
    path = Path(os.environ["FDBQUEUE_LOAD_FAULT_LOG"]) / f"faults-{os.getpid()}.json"
    try:
        path.write_text(json.dumps(injector.injected), encoding="utf-8")
    except OSError:
        pass  # the run's directory is gone: nobody is left to read the counts


if os.environ.get("FDBQUEUE_LOAD_FAULT_LOG"):
    atexit.register(_write_fault_counts)
