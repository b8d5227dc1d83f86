"""What a spawned test process needs to use the parent's store: Django set up the same way."""

from __future__ import annotations

import os
from typing import Any


def child_database(fdbqueue_setting: dict) -> Any:
    """Configure Django in a spawned child exactly like the parent's test store, and open it."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django.test.utils import override_settings

    override_settings(FDBQUEUE=fdbqueue_setting).enable()
    from django_fdbqueue import connection

    return connection.get_database()


def join_all(processes: list, seconds: float) -> None:
    """Join every process within `seconds` each; each must have exited cleanly."""
    for process in processes:
        process.join(seconds)
        assert process.exitcode == 0, f"{process.name} ended with exit code {process.exitcode}"


def kill_leftovers(processes: list) -> None:
    """After a failure, leave no child running (bounded)."""
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join(10)
