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
