"""The app's settings: one ``FDBQUEUE`` dict in Django settings, read into a frozen dataclass.

Everything that decides how the app reaches its store lives here, so the engines, the service
and the checks agree on one set of defaults. ``get_settings()`` is cached because it is called on
every request path; the cache is dropped whenever a test (or ``override_settings``) changes
``FDBQUEUE``.

Validation of the values' *shape* (types, ranges) lives here too, in ``validate_options()``: the
system checks report its findings at start-up, and ``get_settings()`` refuses settings that would
otherwise fail later with a confusing error deep inside an engine. Checks that look at the
outside world (files, the client library, imports) are in ``checks.py``.
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

SETTING_NAME = "FDBQUEUE"

# Engine names the app knows; the modules behind them are in django_fdbqueue.engines.
ENGINE_NAMES = ("embedded", "foundationdb")

DEFAULT_ENGINE = "embedded"
DEFAULT_FILENAME = "fdbqueue.sqlite3"
DEFAULT_API_VERSION = 730
# Oldest API version the app is written for: the 7.1 binding's (database-wide transaction
# timeout and retry limit options need 610 or later; the app is tested with 7.1 to 7.3).
MIN_API_VERSION = 710
# Five seconds is also FoundationDB's own lifetime of a transaction, so a longer timeout buys
# nothing, while having one at all turns an unreachable cluster into an error instead of a hang.
DEFAULT_TIMEOUT = 5.0
DEFAULT_RETRY_LIMIT = None
DEFAULT_ROOT = ("fdbqueue",)
DEFAULT_PERMISSION_CLASSES = ("rest_framework.permissions.IsAuthenticated",)
# FoundationDB takes the timeout in whole milliseconds as a C int.
MAX_TIMEOUT = (2**31 - 1) / 1000
MAX_RETRY_LIMIT = 2**31 - 1
# Long polls a WSGI process may hold at once: half the 4 threads the production guide gives each
# gunicorn process, so pushes, acks and reads always find a free thread beside the waiters.
DEFAULT_WAIT_BUDGET = 2
# Who may do what to which queue (django_fdbqueue.access): grants, or any authenticated user.
ACCESS_MODES = ("grants", "authenticated")
DEFAULT_ACCESS = "grants"

# FDBQUEUE key -> QueueSettings field.
KEYS = {
    "ENGINE": "engine",
    "PATH": "path",
    "CLUSTER_FILE": "cluster_file",
    "CLIENT_LIBRARY": "client_library",
    "API_VERSION": "api_version",
    "TIMEOUT": "timeout",
    "RETRY_LIMIT": "retry_limit",
    "ROOT": "root",
    "PERMISSION_CLASSES": "permission_classes",
    "FAULTS": "faults",
    "WAIT_BUDGET": "wait_budget",
    "ACCESS": "access",
}


@dataclass(frozen=True)
class QueueSettings:
    """The app's effective configuration; build it with ``get_settings()`` or directly in tests."""

    # The ``#:`` comments are each key's meaning; the docs' settings reference is generated from them.

    #: Where the queues are stored: ``"embedded"`` (one local SQLite file, no server) or
    #: ``"foundationdb"`` (a FoundationDB cluster, through its client library).
    engine: str = DEFAULT_ENGINE
    #: The embedded engine's database file (``str`` or ``pathlib.Path``; missing directories are
    #: created). Unset: ``BASE_DIR / "fdbqueue.sqlite3"``, or that name in the working directory
    #: when the project has no ``BASE_DIR``. Ignored by ``foundationdb``.
    path: str = DEFAULT_FILENAME
    #: The cluster's ``fdb.cluster`` file. ``None`` lets the client find it: the
    #: ``FDB_CLUSTER_FILE`` environment variable, then the system's default. Ignored by ``embedded``.
    cluster_file: str | None = None
    #: FoundationDB's client library (``libfdb_c.so``) when it is outside the loader's search path;
    #: loaded when ``django_fdbqueue`` is first imported. ``None``: the ``FDBQUEUE_CLIENT_LIBRARY``
    #: environment variable, else the dynamic loader's choice.
    client_library: str | None = None
    #: The FoundationDB API version selected once per process, from 710 to the newest the
    #: installed binding knows.
    api_version: int = DEFAULT_API_VERSION
    #: Seconds a transaction may take, retries included, before it fails with error 1031;
    #: ``None`` switches the limit off.
    timeout: float | None = DEFAULT_TIMEOUT
    #: Retries of a transaction after a retryable error (such as a conflict) before the error is
    #: raised; ``None``: no limit but ``TIMEOUT``.
    retry_limit: int | None = DEFAULT_RETRY_LIMIT
    #: The tuple prefix of every key the app writes, so it can share a cluster with other data
    #: (mind the trailing comma of a one-element tuple).
    root: tuple[Any, ...] = DEFAULT_ROOT
    #: Dotted paths of the Django REST framework permission classes that guard the REST API and
    #: the metrics endpoint.
    permission_classes: tuple[str, ...] = DEFAULT_PERMISSION_CLASSES
    #: Embedded engine only, for tests: fractions of commits to fail on purpose, e.g.
    #: ``{"not_committed": 0.1, "unknown_applied": 0.05, "unknown_not_applied": 0.05, "seed": 1}``.
    faults: dict[str, Any] | None = field(default=None, hash=False)
    #: REST API long polls (``pop`` and ``claim`` with ``wait`` > 0) one server process lets wait
    #: at once. Each holds a server thread, so keep it below the process's threads; a wait beyond
    #: it is answered at once (with an item if one is visible, else 204 with ``Retry-After``).
    #: ``0``: every long poll answers at once; ``None``: no limit (a thread per request).
    wait_budget: int | None = DEFAULT_WAIT_BUDGET
    #: Who may do what to which queue through the REST API, the admin and the metrics endpoint:
    #: ``"grants"``, only what a user's queue grants, Django permissions and superuser status give
    #: (see the permissions guide); ``"authenticated"``, every authenticated user may do anything
    #: (the behaviour before grants existed; a system check warns while it is on).
    access: str = DEFAULT_ACCESS

    def __post_init__(self) -> None:
        # Paths may come in as pathlib.Path (Django's BASE_DIR style); engines want plain strings.
        if isinstance(self.path, os.PathLike):
            object.__setattr__(self, "path", os.fspath(self.path))
        if isinstance(self.client_library, os.PathLike):
            object.__setattr__(self, "client_library", os.fspath(self.client_library))
        if isinstance(self.cluster_file, os.PathLike):
            object.__setattr__(self, "cluster_file", os.fspath(self.cluster_file))
        if isinstance(self.permission_classes, list):
            object.__setattr__(self, "permission_classes", tuple(self.permission_classes))


class Problem(NamedTuple):
    """One finding about the FDBQUEUE setting; checks.py turns it into a Django check message."""

    id: str  # e.g. "fdbqueue.E003"
    msg: str
    hint: str

    @property
    def is_error(self) -> bool:
        return ".E" in self.id


def default_path() -> str:
    """The embedded store's file: beside the project (BASE_DIR) when the project defines one."""
    base_dir = getattr(django_settings, "BASE_DIR", None)
    if base_dir:
        return os.path.join(os.fspath(base_dir), DEFAULT_FILENAME)
    return DEFAULT_FILENAME


def raw_options() -> Any:
    """The FDBQUEUE setting as written (an empty dict when absent)."""
    return getattr(django_settings, SETTING_NAME, {})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def validate_options(options: Any) -> list[Problem]:
    """Check the shape of every FDBQUEUE value, without touching files, libraries or imports."""
    if not isinstance(options, Mapping):
        return [
            Problem(
                "fdbqueue.E001",
                f"The {SETTING_NAME} setting must be a dict, not {type(options).__name__}.",
                f'Write it as {SETTING_NAME} = {{"ENGINE": "embedded", ...}} or remove it to use the defaults.',
            )
        ]
    problems: list[Problem] = []
    for check in _OPTION_CHECKS:
        problems.extend(check(options))
    return problems


def _unknown_keys(options: Mapping[str, Any]) -> list[Problem]:
    problems = []
    for key in options:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), list(KEYS), n=1)
            suggestion = f'Did you mean "{close[0]}"? ' if close else ""
            problems.append(
                Problem(
                    "fdbqueue.W001",
                    f"Unknown key {key!r} in {SETTING_NAME}: it is ignored.",
                    f"{suggestion}Known keys: {', '.join(KEYS)}.",
                )
            )
    return problems


def _engine(options: Mapping[str, Any]) -> list[Problem]:
    engine = options.get("ENGINE", DEFAULT_ENGINE)
    if engine in ENGINE_NAMES:
        return []
    return [
        Problem(
            "fdbqueue.E002",
            f"Unknown {SETTING_NAME}['ENGINE'] {engine!r}.",
            'Use "embedded" (a local SQLite file, no server needed) or "foundationdb" '
            "(a real cluster through the FoundationDB client library).",
        )
    ]


def _api_version(options: Mapping[str, Any]) -> list[Problem]:
    from django_fdbqueue.fdbapi import latest_api_version

    api_version = options.get("API_VERSION", DEFAULT_API_VERSION)
    latest = latest_api_version()
    if _is_int(api_version) and MIN_API_VERSION <= api_version <= latest:
        return []
    return [
        Problem(
            "fdbqueue.E003",
            f"{SETTING_NAME}['API_VERSION'] is {api_version!r}; it must be an integer from "
            f"{MIN_API_VERSION} to {latest}.",
            f"Use {min(DEFAULT_API_VERSION, latest)} (the installed foundationdb binding "
            f"supports up to {latest}), or remove the key to use the default.",
        )
    ]


#: The path-valued keys: (key, check id, what it must be, the hint).
_PATH_KEYS = (
    (
        "PATH",
        "fdbqueue.E005",
        "a non-empty file path",
        'Give the embedded store\'s file, e.g. BASE_DIR / "fdbqueue.sqlite3", or remove the key to use that default.',
    ),
    (
        "CLUSTER_FILE",
        "fdbqueue.E004",
        "a file path or None",
        "Give the path of the cluster's fdb.cluster file, or None to use the client's "
        "default (the FDB_CLUSTER_FILE environment variable, then the system's "
        "fdb.cluster).",
    ),
    (
        "CLIENT_LIBRARY",
        "fdbqueue.E012",
        "a file path or None",
        "Give the path of libfdb_c.so (e.g. /usr/lib/libfdb_c.so), or None to let the dynamic loader find it.",
    ),
)


def _paths(options: Mapping[str, Any]) -> list[Problem]:
    problems = []
    for key, check_id, must, hint in _PATH_KEYS:
        value = options.get(key)
        if value is not None and not (_is_path(value) and os.fspath(value)):
            problems.append(Problem(check_id, f"{SETTING_NAME}[{key!r}] is {value!r}; it must be {must}.", hint))
    return problems


def _time_limits(options: Mapping[str, Any]) -> list[Problem]:
    problems = []
    timeout = options.get("TIMEOUT", DEFAULT_TIMEOUT)
    if timeout is not None and not (_is_number(timeout) and 0 < timeout <= MAX_TIMEOUT):
        problems.append(
            Problem(
                "fdbqueue.E006",
                f"{SETTING_NAME}['TIMEOUT'] is {timeout!r}; it must be a positive number of seconds or None.",
                f"Use e.g. {DEFAULT_TIMEOUT} (the default), or None to let transactions run without a time limit.",
            )
        )
    retry_limit = options.get("RETRY_LIMIT", DEFAULT_RETRY_LIMIT)
    if retry_limit is not None and not (_is_int(retry_limit) and 0 <= retry_limit <= MAX_RETRY_LIMIT):
        problems.append(
            Problem(
                "fdbqueue.E007",
                f"{SETTING_NAME}['RETRY_LIMIT'] is {retry_limit!r}; it must be a non-negative integer or None.",
                "Use e.g. 100, or None (the default) to retry retryable errors until TIMEOUT.",
            )
        )
    return problems


def _root_problem(root: Any) -> str | None:
    """Why ROOT cannot prefix keys, or None when it can."""
    from fdb import tuple as fdb_tuple

    if not isinstance(root, tuple):
        return f"it must be a tuple, not {type(root).__name__}"
    try:
        fdb_tuple.pack(root)
    except Exception as exc:  # the tuple layer raises ValueError, TypeError or plain Exception
        return f"the FoundationDB tuple layer cannot encode it ({exc})"
    return None


def _root(options: Mapping[str, Any]) -> list[Problem]:
    root = options.get("ROOT", DEFAULT_ROOT)
    problem = _root_problem(root)
    if problem:
        return [
            Problem(
                "fdbqueue.E008",
                f"{SETTING_NAME}['ROOT'] is {root!r}: {problem}.",
                'Use a tuple of strings, integers or bytes, e.g. ("fdbqueue",) (mind the trailing comma).',
            )
        ]
    if root == ():
        return [
            Problem(
                "fdbqueue.W002",
                f"{SETTING_NAME}['ROOT'] is empty: the app's keys are not separated from other data in the database.",
                'Give the app its own prefix, e.g. ("fdbqueue",), unless the database is dedicated to it.',
            )
        ]
    return []


def _permission_classes(options: Mapping[str, Any]) -> list[Problem]:
    classes = options.get("PERMISSION_CLASSES", DEFAULT_PERMISSION_CLASSES)
    if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes):
        return []
    return [
        Problem(
            "fdbqueue.E009",
            f"{SETTING_NAME}['PERMISSION_CLASSES'] is {classes!r}; it must be a list of dotted paths.",
            'Use e.g. ["rest_framework.permissions.IsAuthenticated"] (strings, not the classes themselves).',
        )
    ]


def _faults(options: Mapping[str, Any]) -> list[Problem]:
    faults = options.get("FAULTS")
    if faults is not None and not isinstance(faults, Mapping):
        return [
            Problem(
                "fdbqueue.E011",
                f"{SETTING_NAME}['FAULTS'] is {faults!r}; it must be a dict or None.",
                'Use e.g. {"not_committed": 0.1, "seed": 1} for fault injection in tests, or None.',
            )
        ]
    if faults and options.get("ENGINE", DEFAULT_ENGINE) == "foundationdb":
        return [
            Problem(
                "fdbqueue.W003",
                f"{SETTING_NAME}['FAULTS'] is ignored by the foundationdb engine.",
                "Fault injection exists only in the embedded engine; remove FAULTS from this configuration.",
            )
        ]
    return []


def _wait_budget(options: Mapping[str, Any]) -> list[Problem]:
    budget = options.get("WAIT_BUDGET", DEFAULT_WAIT_BUDGET)
    if budget is None or (_is_int(budget) and budget >= 0):
        return []
    return [
        Problem(
            "fdbqueue.E014",
            f"{SETTING_NAME}['WAIT_BUDGET'] is {budget!r}; it must be a non-negative integer or None.",
            f"Use fewer than each server process's threads, e.g. {DEFAULT_WAIT_BUDGET} (the default) for "
            "gunicorn's --threads 4; 0 answers every long poll at once, None sets no limit.",
        )
    ]


def _access(options: Mapping[str, Any]) -> list[Problem]:
    access = options.get("ACCESS", DEFAULT_ACCESS)
    if access == "authenticated":
        return [
            Problem(
                "fdbqueue.W006",
                f"{SETTING_NAME}['ACCESS'] is \"authenticated\": every authenticated user may do anything "
                "to every queue.",
                'Give users queue grants or permissions and remove the key (the default, "grants"), '
                "unless every account of this site may be trusted with every queue.",
            )
        ]
    if access in ACCESS_MODES:
        return []
    return [
        Problem(
            "fdbqueue.E015",
            f'{SETTING_NAME}[\'ACCESS\'] is {access!r}; it must be "grants" or "authenticated".',
            'Use "grants" (the default: only what grants and permissions give) or "authenticated" '
            "(any authenticated user may do anything).",
        )
    ]


#: validate_options' checks, in the order their problems are reported.
_OPTION_CHECKS = (
    _unknown_keys,
    _engine,
    _api_version,
    _paths,
    _time_limits,
    _root,
    _permission_classes,
    _faults,
    _wait_budget,
    _access,
)


@functools.lru_cache(maxsize=1)
def get_settings() -> QueueSettings:
    """The effective settings: FDBQUEUE merged over the defaults (cached until FDBQUEUE changes).

    Raises ImproperlyConfigured for values that cannot work, with the same message the system
    check gives, because checks do not run under every server (e.g. a WSGI server in production).
    """
    options = raw_options()
    errors = [p for p in validate_options(options) if p.is_error]
    if errors:
        first = errors[0]
        raise ImproperlyConfigured(f"{first.msg} {first.hint} ({first.id})")

    values: dict[str, Any] = {}
    for key, name in KEYS.items():
        if key in options:
            values[name] = options[key]
    if values.get("path") is None:
        values["path"] = default_path()
    if values.get("faults") is not None:
        values["faults"] = dict(values["faults"])
    return QueueSettings(**values)


def _on_setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in (SETTING_NAME, "BASE_DIR"):
        get_settings.cache_clear()


setting_changed.connect(_on_setting_changed, dispatch_uid="django_fdbqueue.conf.setting_changed")
