"""The ``foundationdb`` engine: a real FoundationDB cluster through the official Python binding.

The binding needs FoundationDB's C client library (libfdb_c), which pip cannot install. Everything
that touches it is kept here, so a missing library becomes one clear ImproperlyConfigured that says
what to install, instead of a loader error from deep inside the binding.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

from django_fdbqueue.engines import wait_bound
from django_fdbqueue.fdbapi import ErrorCode, describe

if TYPE_CHECKING:
    from django_fdbqueue.conf import QueueSettings

INSTALL_HINT = (
    "Install the FoundationDB client packages (for example foundationdb-clients 7.3 from "
    "FoundationDB's releases) on this machine; or, for a libfdb_c.so outside the loader's search "
    "path, give its path as FDBQUEUE['CLIENT_LIBRARY'] (or the FDBQUEUE_CLIENT_LIBRARY environment "
    "variable); or set FDBQUEUE['ENGINE'] to 'embedded', which needs no client library."
)

# fdb.api_version() may run once per process; the lock makes "check, then select" atomic.
_select_lock = threading.Lock()


def client_library_error() -> str | None:
    """Why the C client library cannot be used, or None when it loads.

    Only imports the binding's C layer: it never selects an API version, so the system checks
    can call it without fixing the process's API version.
    """
    try:
        import fdb.impl as impl
    except Exception as exc:  # the binding raises a bare Exception (or OSError) when libfdb_c is missing
        return str(exc) or type(exc).__name__
    # A module standing in for fdb.impl (without the loaded library) is not the real thing.
    if getattr(impl, "_capi", None) is None:
        return "the FoundationDB client library (libfdb_c) is not loaded"
    return None


def select_api_version(version: int) -> Any:
    """Select ``version`` for this process (once), returning the ready ``fdb`` module.

    A second, different version cannot be selected in the same process: that is reported as
    ImproperlyConfigured rather than the binding's RuntimeError.
    """
    import fdb

    with _select_lock:
        if fdb.is_api_version_selected():
            current = fdb.get_api_version()
            if current != version:
                raise ImproperlyConfigured(
                    f"FoundationDB API version {current} is already selected in this process, but "
                    f"FDBQUEUE['API_VERSION'] asks for {version}; a process can use only one. Set "
                    f"API_VERSION to {current} (or restart the process after changing it)."
                )
            return fdb
        problem = client_library_error()
        if problem is not None:
            raise ImproperlyConfigured(
                f"The foundationdb engine cannot load the FoundationDB client library ({problem}). {INSTALL_HINT}"
            )
        try:
            fdb.api_version(version)
        except Exception as exc:  # RuntimeError from the binding, OSError from the loader
            raise ImproperlyConfigured(
                f"FoundationDB API version {version} could not be selected: {exc}. Install "
                "FoundationDB client packages that match the foundationdb binding (7.3 for "
                "binding 7.3.x), or set FDBQUEUE['API_VERSION'] to a version they support."
            ) from exc
    return fdb


def configure(database: Any, settings: QueueSettings) -> None:
    """Apply TIMEOUT and RETRY_LIMIT to every transaction the database creates.

    "Off" is set explicitly too, so a handle configured twice (the tests' shared one) keeps no
    value from earlier settings. TIMEOUT also sets
    the handle's ``wait_bound``, the deadline the waiting thread keeps itself (``wait_bound``).
    """
    import fdb.impl

    wait_bound.install(fdb.impl)
    database.wait_bound = wait_bound.bound_for(settings.timeout)
    database.reuse_read_versions = True  # see fdbapi: writes that start from this thread's last commit
    if settings.timeout is None:
        database.options.set_transaction_timeout(0)  # 0 disables the timeout
    else:
        database.options.set_transaction_timeout(max(1, round(settings.timeout * 1000)))
    if settings.retry_limit is None:
        database.options.set_transaction_retry_limit(-1)  # -1 disables the limit
    else:
        database.options.set_transaction_retry_limit(settings.retry_limit)


def _library_hint(settings: QueueSettings) -> str:
    """Why a CLIENT_LIBRARY setting did not help, when it is set."""
    from django_fdbqueue import clientlib

    path = settings.client_library
    if not path:
        return ""
    if clientlib.loaded_path == os.path.abspath(path):
        return ""
    if clientlib.load_error:
        return f" FDBQUEUE['CLIENT_LIBRARY'] ({path}) could not be loaded: {clientlib.load_error}."
    return (
        f" FDBQUEUE['CLIENT_LIBRARY'] ({path}) is loaded when django_fdbqueue is first imported: "
        "set it in the settings module, not later, and restart the process."
    )


def _own_database(fdb: Any, cluster_file: str | None) -> Any:
    """A handle of its own on the cluster, never the one ``fdb.open`` shares per cluster file.

    The app attaches its ROOT and options to the handle it opens: on the shared handle, two
    settings naming one cluster under different ROOTs (tests, scripts) would overwrite each
    other's, and a project's own ``fdb.open()`` would inherit them.
    """
    try:
        fdb.impl.init()  # the client's network thread, as fdb.open starts it: once per process
    except fdb.FDBError as exc:
        if exc.code != ErrorCode.CLIENT_INVALID_OPERATION:  # 2000: the network runs already
            raise
    return fdb.impl.create_database(cluster_file)


def open_database(settings: QueueSettings) -> Any:
    """Open the cluster named by ``settings.cluster_file`` (None: the client's default)."""
    try:
        fdb = select_api_version(settings.api_version)
    except ImproperlyConfigured as exc:
        raise ImproperlyConfigured(f"{exc}{_library_hint(settings)}") from exc
    try:
        database = _own_database(fdb, settings.cluster_file)
    except fdb.FDBError as exc:
        where = settings.cluster_file or "the client's default cluster file"
        raise ImproperlyConfigured(
            f"Could not open the FoundationDB database of {where}: {describe(exc)} "
            f"(error {exc.code}). Check FDBQUEUE['CLUSTER_FILE'] and that the file is readable."
        ) from exc
    configure(database, settings)
    return database
