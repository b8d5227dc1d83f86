"""A throwaway store for the measuring scripts beside this file: made, opened and removed.

``pop-contention.py``, ``async-ops.py`` and ``async-waiters.py`` each run on a store of their own:
a fresh embedded file in a temporary folder, or a fresh ROOT on a FoundationDB cluster (so a run
never meets another's keys), removed when the run ends. They import this module by name: Python
puts a script's own folder first on ``sys.path``, and spawned child processes inherit it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from typing import Any

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def store_setting(purpose: str, cluster_file: str | None, client_library: str | None = None) -> dict[str, Any]:
    """The FDBQUEUE setting of a run's store: a fresh ROOT on the cluster, or an embedded file.

    ``client_library`` defaults to ``$FDBQUEUE_CLIENT_LIBRARY``.
    """
    if not cluster_file:
        folder = tempfile.mkdtemp(prefix=f"fdbqueue-{purpose}-")
        return {"ENGINE": "embedded", "PATH": os.path.join(folder, "store.sqlite3")}
    store: dict[str, Any] = {
        "ENGINE": "foundationdb",
        "CLUSTER_FILE": cluster_file,
        "ROOT": (f"fdbqueue-{purpose}", uuid.uuid4().hex),
    }
    library = client_library or os.environ.get("FDBQUEUE_CLIENT_LIBRARY")
    if library:
        store["CLIENT_LIBRARY"] = library
    return store


def open_store(store: dict[str, Any]) -> Any:
    """Django set up on ``store`` (an FDBQUEUE setting) in this process; its database handle."""
    sys.path.insert(0, ROOT_DIR)
    import django
    from django.conf import settings

    # The app's models (queue grants) refer to users and groups: auth and contenttypes come with it.
    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_fdbqueue"],
        FDBQUEUE=store,
        USE_TZ=True,
    )
    django.setup()
    from django_fdbqueue.connection import get_database

    return get_database()


def forget(store: dict[str, Any]) -> None:
    """Remove the run's store: its ROOT cleared on the cluster, or the embedded store's folder."""
    from django.conf import settings

    if settings.configured:
        from django_fdbqueue import connection

        if store["ENGINE"] == "foundationdb":
            space = connection.root_subspace().range()
            del connection.get_database()[space.start : space.stop]
        connection.reset_database()
    if store["ENGINE"] == "embedded":
        shutil.rmtree(os.path.dirname(store["PATH"]), ignore_errors=True)
