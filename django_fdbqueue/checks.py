"""System checks for the FDBQUEUE setting, run by ``manage.py check``, ``runserver`` and ``migrate``.

They report a wrong configuration at start-up, each with a hint that says how to fix it, instead
of letting it surface as an obscure error at the first queue operation. Check ids:

- fdbqueue.E001  FDBQUEUE is not a dict.
- fdbqueue.W001  FDBQUEUE has a key the app does not know (most likely a typo).
- fdbqueue.E002  ENGINE is neither "embedded" nor "foundationdb".
- fdbqueue.E003  API_VERSION is not an integer the installed binding accepts.
- fdbqueue.E004  CLUSTER_FILE is not a path, or (engine foundationdb) not a readable file.
- fdbqueue.E005  PATH is not a path, or (engine embedded) its file or directory is not writable
                 or cannot be created.
- fdbqueue.E006  TIMEOUT is not a positive number of seconds or None.
- fdbqueue.E007  RETRY_LIMIT is not a non-negative integer or None.
- fdbqueue.E008  ROOT is not a tuple the FoundationDB tuple layer can encode.
- fdbqueue.W002  ROOT is empty, so the app's keys share the keyspace with other data.
- fdbqueue.E009  PERMISSION_CLASSES is not a list of importable dotted paths.
- fdbqueue.E010  ENGINE is "foundationdb" but the FoundationDB client library cannot be loaded.
- fdbqueue.E011  FAULTS is not a dict or None, or (engine embedded) not a valid fault configuration.
- fdbqueue.W003  FAULTS is set although the foundationdb engine ignores it.
- fdbqueue.E012  CLIENT_LIBRARY is not a path, or not a client library this process can load.
- fdbqueue.W004  CLIENT_LIBRARY differs from the library this process loaded at start-up.
- fdbqueue.E101  a TASKS backend of this app has OPTIONS it cannot use (reported by the backend's
                 own check, django_fdbqueue.tasks.backend).
- fdbqueue.W005  a schedule declared in code is not in the queue store: no scheduler has written
                 it there (``check_declared_schedules``).
- fdbqueue.E013  an installed app's schedules module cannot be imported (a refused declaration).
- fdbqueue.E014  WAIT_BUDGET is not a non-negative integer or None.
- fdbqueue.E015  ACCESS is neither "grants" nor "authenticated".
- fdbqueue.W006  ACCESS is "authenticated": every authenticated user may do anything to every queue.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.core.checks import CheckMessage, Error, Warning
from django.utils.module_loading import import_string

from django_fdbqueue.conf import (
    DEFAULT_ENGINE,
    DEFAULT_PERMISSION_CLASSES,
    Problem,
    default_path,
    raw_options,
    validate_options,
)


def _message(problem: Problem) -> CheckMessage:
    level = Error if problem.is_error else Warning
    return level(problem.msg, hint=problem.hint, id=problem.id)


def _nearest_existing(path: str) -> str:
    """The path itself or its closest ancestor that exists."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def embedded_path_problem(path: str) -> str | None:
    """Why the embedded engine could not create or write its store at ``path``, or None.

    SQLite writes its journal files beside the database, so the directory must be writable too.
    """
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return f"{path} is a directory, not a file"
    if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
        return f"the file {path} is not readable and writable by this process"
    directory = os.path.dirname(path)
    existing = _nearest_existing(directory)
    if not os.path.isdir(existing):
        return f"{existing} is not a directory, so {directory} cannot be created"
    if not os.access(existing, os.W_OK | os.X_OK):
        if existing == directory:
            return f"the directory {directory} is not writable by this process"
        return f"the directory {directory} does not exist and {existing} is not writable"
    return None


def cluster_file_problem(cluster_file: str) -> str | None:
    """Why the FoundationDB client could not read ``cluster_file``, or None."""
    if not os.path.exists(cluster_file):
        return f"{cluster_file} does not exist"
    if not os.path.isfile(cluster_file):
        return f"{cluster_file} is not a file"
    if not os.access(cluster_file, os.R_OK):
        return f"{cluster_file} is not readable by this process"
    return None


def _environment_messages(options: Mapping[str, Any], shape_ids: set[str]) -> list[CheckMessage]:
    """Checks that look outside the settings: files, the client library, importable classes.

    A key whose shape is already wrong (its id in ``shape_ids``) is not looked at again here.
    """
    messages: list[CheckMessage] = []
    engine = options.get("ENGINE", DEFAULT_ENGINE)
    if engine == "embedded":
        messages += _embedded_messages(options, shape_ids)
    if engine == "foundationdb":
        messages += _cluster_messages(options, shape_ids)
    if options.get("CLIENT_LIBRARY") is not None and "fdbqueue.E012" not in shape_ids:
        messages += _client_library_messages(os.fspath(options["CLIENT_LIBRARY"]))
    if "fdbqueue.E009" not in shape_ids:
        messages += _permission_class_messages(options)
    return messages


def _embedded_messages(options: Mapping[str, Any], shape_ids: set[str]) -> list[CheckMessage]:
    """The embedded store's file must be writable, and FAULTS a configuration it can use."""
    messages: list[CheckMessage] = []
    if "fdbqueue.E005" not in shape_ids:
        path = os.fspath(options.get("PATH") or default_path())
        problem = embedded_path_problem(path)
        if problem:
            messages.append(
                Error(
                    f"The embedded engine cannot use FDBQUEUE['PATH'] {path!r}: {problem}.",
                    hint="Point PATH at a file in a directory this process can write to (the "
                    "directory is created if its parent is writable).",
                    id="fdbqueue.E005",
                )
            )
    faults = options.get("FAULTS")
    if faults and "fdbqueue.E011" not in shape_ids:
        from django_fdbqueue.engines.embedded import FaultConfig

        try:
            FaultConfig.from_value(faults)
        except (TypeError, ValueError) as exc:
            messages.append(
                Error(
                    f"FDBQUEUE['FAULTS'] is not a valid fault configuration: {exc}.",
                    hint="Give fractions from 0 to 1 (adding up to at most 1) for not_committed, "
                    "unknown_applied and unknown_not_applied, and optionally an integer seed.",
                    id="fdbqueue.E011",
                )
            )
    return messages


def _cluster_messages(options: Mapping[str, Any], shape_ids: set[str]) -> list[CheckMessage]:
    """The cluster file must be readable and the client library loadable."""
    messages: list[CheckMessage] = []
    cluster_file = options.get("CLUSTER_FILE")
    if cluster_file is not None and "fdbqueue.E004" not in shape_ids:
        cluster_file = os.fspath(cluster_file)
        problem = cluster_file_problem(cluster_file)
        if problem:
            messages.append(
                Error(
                    f"FDBQUEUE['CLUSTER_FILE'] cannot be read: {problem}.",
                    hint="Give the path of the cluster's fdb.cluster file (copy it from a "
                    "server, usually /etc/foundationdb/fdb.cluster) and make it readable, or "
                    "set None to use the client's default.",
                    id="fdbqueue.E004",
                )
            )

    from django_fdbqueue.engines.foundationdb import INSTALL_HINT, client_library_error

    problem = client_library_error()
    if problem:
        messages.append(
            Error(
                "FDBQUEUE['ENGINE'] is 'foundationdb' but the FoundationDB client library "
                f"cannot be loaded ({problem}).",
                hint=INSTALL_HINT,
                id="fdbqueue.E010",
            )
        )
    return messages


def _permission_class_messages(options: Mapping[str, Any]) -> list[CheckMessage]:
    """Every PERMISSION_CLASSES entry must import."""
    messages: list[CheckMessage] = []
    for dotted in options.get("PERMISSION_CLASSES", DEFAULT_PERMISSION_CLASSES):
        try:
            import_string(dotted)
        except Exception as exc:  # ImportError, or whatever the module raises on import
            messages.append(
                Error(
                    f"FDBQUEUE['PERMISSION_CLASSES'] entry {dotted!r} cannot be imported: {exc}.",
                    hint="Use the dotted path of a Django REST framework permission class, "
                    'e.g. "rest_framework.permissions.IsAdminUser", and check its spelling.',
                    id="fdbqueue.E009",
                )
            )
    return messages


def _client_library_messages(path: str) -> list[CheckMessage]:
    """CLIENT_LIBRARY must be a loadable file, and the one this process loaded at start-up."""
    from django_fdbqueue import clientlib

    hint = (
        "Point CLIENT_LIBRARY at FoundationDB's libfdb_c.so (the foundationdb-clients package "
        "installs /usr/lib/libfdb_c.so), or remove it to let the dynamic loader find the library."
    )
    problem = clientlib.library_problem(path)
    if problem is None and clientlib.loaded_path is None and clientlib.load_error:
        problem = clientlib.load_error
    if problem is not None:
        return [Error(f"FDBQUEUE['CLIENT_LIBRARY'] cannot be loaded: {problem}.", hint=hint, id="fdbqueue.E012")]
    if clientlib.loaded_path != os.path.abspath(path):
        return [
            Warning(
                f"FDBQUEUE['CLIENT_LIBRARY'] is {path!r}, but this process "
                + (f"loaded {clientlib.loaded_path!r}" if clientlib.loaded_path else "did not load it")
                + ": the library is loaded once, when django_fdbqueue is first imported.",
                hint="Set CLIENT_LIBRARY in the settings module itself (not later, e.g. in a test "
                "override) and restart the process.",
                id="fdbqueue.W004",
            )
        ]
    return []


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Every FDBQUEUE check; registered under the "fdbqueue" tag in AppConfig.ready()."""
    options = raw_options()
    problems = validate_options(options)
    messages = [_message(p) for p in problems]
    if not isinstance(options, Mapping):
        return messages
    shape_ids = {p.id for p in problems if p.is_error}
    if "fdbqueue.E002" in shape_ids:
        return messages  # engine-specific checks mean nothing for an unknown engine
    return messages + _environment_messages(options, shape_ids)


#: How long the declared-schedules check waits for the store, in seconds: it must not hold up a command.
SCHEDULES_CHECK_TIMEOUT = 1.0


def check_declared_schedules(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """fdbqueue.W005 for each declared schedule missing from the store; fdbqueue.E013 when an app's
    schedules module fails to import. Free without declarations; else one bounded read, skipped
    when the store cannot be read (the settings checks say why)."""
    from django_fdbqueue.schedules import registry

    try:
        names = [schedule.name for schedule in registry.declared()]
    except Exception as exc:  # an InvalidSchedule at import, or whatever the module raises
        return [
            Error(
                f"An installed app's {registry.MODULE} module cannot be imported: {type(exc).__name__}: {exc}.",
                hint="Fix the declaration it names: the scheduler imports that module to find its schedules.",
                id="fdbqueue.E013",
            )
        ]
    return [
        Warning(
            f"The schedule {name!r} is declared in code but not in the queue store: no scheduler has written it there.",
            hint="Start `manage.py fdbqueue scheduler` (it writes the declared schedules when it starts) or call "
            "schedules.sync(db). If one runs already, declare the schedule in an app's schedules.py (or import its "
            "module from there): the scheduler imports only those.",
            id="fdbqueue.W005",
        )
        for name in _not_stored(names)
    ]


def _not_stored(names: list[str]) -> list[str]:
    """Those of ``names`` the store has no schedule for; none when the store cannot be read in time."""
    if not names:
        return []
    from django_fdbqueue.connection import get_database
    from django_fdbqueue.schedules import store

    try:
        tr = get_database().create_transaction()
        tr.options.set_timeout(int(SCHEDULES_CHECK_TIMEOUT * 1000))
        return store.missing(tr, names)
    except Exception:  # noqa: BLE001 - an unreachable or misconfigured store: the settings checks report it
        return []
