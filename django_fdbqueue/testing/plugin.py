"""pytest fixtures: a fresh queue store per test, on the embedded engine and on a real cluster.

Installed as a pytest plugin (entry point ``fdbqueue``; disable with ``-p no:fdbqueue``), the way
pytest-django gives a test database: ``fdbqueue_engine`` runs a test once per engine,
``fdbqueue_store`` points ``settings.FDBQUEUE`` at a fresh store of that engine and returns the
app's database, and ``fdbqueue_cluster_file`` is the cluster the ``foundationdb`` runs use (the
one ``FDBQUEUE_TEST_CLUSTER_FILE`` names, or a throwaway local cluster, see ``binaries`` and
``cluster``).

The options, and what happens without a cluster: the testing guide (docs/howto/testing.md).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Any, Iterator

import pytest

from . import binaries
from .cluster import ClusterError, LocalCluster, commit_latency_knobs, parse_latency

ENV_CLUSTER_FILE = "FDBQUEUE_TEST_CLUSTER_FILE"
ENV_MODE = "FDBQUEUE_TEST_CLUSTER"
ENV_COMMIT_LATENCY = "FDBQUEUE_TEST_COMMIT_LATENCY"
MODES = ("auto", "require", "off")
ENGINES = ("embedded", "foundationdb")


class _State:
    """The run's one cluster (the binding opens one network per process, so one per run)."""

    mode = "auto"
    commit_latency: float | None = None
    cluster_file: str | None = None
    library: str | None = None
    problem: str | None = None
    started: LocalCluster | None = None
    resolved = False
    tally: dict[str, dict[str, int]] = {}


_state = _State()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fdbqueue", "django-fdbqueue stores")
    group.addoption(
        "--fdbqueue-cluster",
        choices=MODES,
        default=None,
        help="auto: use a cluster when one is configured or can be started (default); "
        "require: fail the cluster runs without one; off: skip them "
        f"(default from ${ENV_MODE}).",
    )
    group.addoption(
        "--fdbqueue-engines",
        default=None,
        help="comma-separated engines fdbqueue_engine runs on (default: embedded,foundationdb)",
    )
    group.addoption(
        "--fdbqueue-commit-latency",
        default=None,
        metavar="TIME",
        help="give the local cluster the plugin starts this commit latency, e.g. 5ms "
        f"(default from ${ENV_COMMIT_LATENCY}; a cluster named by its file keeps its own)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Load the client library before Django (and so the binding) is imported."""
    from django_fdbqueue import clientlib

    if (early_config.getoption("--fdbqueue-cluster", None) or os.environ.get(ENV_MODE)) == "off":
        return
    library = os.environ.get(clientlib.ENV_VARIABLE)
    if not library:
        try:
            library = binaries.find(need_library=True).library
        except binaries.BinariesNotFound:
            library = None
    if library:
        if clientlib.load(library):
            loaded = clientlib.loaded_path
            assert loaded is not None  # set by a load that succeeded
            _state.library = loaded
            # Processes the tests start load it too, before their settings are read.
            os.environ[clientlib.ENV_VARIABLE] = loaded
        else:
            _state.problem = f"the client library {library} could not be loaded: {clientlib.load_error}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: runs against a real FoundationDB cluster")
    _state.mode = config.getoption("--fdbqueue-cluster") or os.environ.get(ENV_MODE) or "auto"
    if _state.mode not in MODES:
        raise pytest.UsageError(f"{ENV_MODE} must be one of {', '.join(MODES)}, not {_state.mode!r}")
    latency = config.getoption("--fdbqueue-commit-latency") or os.environ.get(ENV_COMMIT_LATENCY)
    try:
        _state.commit_latency = parse_latency(latency) if latency else None
        if _state.commit_latency is not None:
            commit_latency_knobs(_state.commit_latency)
    except ValueError as error:
        raise pytest.UsageError(f"--fdbqueue-commit-latency / {ENV_COMMIT_LATENCY}: {error}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    if _state.started is not None:
        _state.started.stop()
        _state.started = None


def _engine_of(report: pytest.TestReport) -> str:
    return "foundationdb" if "cluster" in report.keywords else "embedded"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Tally outcomes per engine: the cluster runs carry the ``cluster`` marker."""
    if (
        report.when == "call"
        or (report.when == "setup" and report.outcome != "passed")
        or (report.when == "teardown" and report.outcome == "failed")
    ):
        outcome = "error" if report.when != "call" and report.outcome == "failed" else report.outcome
        tally = _state.tally.setdefault(_engine_of(report), {})
        tally[outcome] = tally.get(outcome, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _state.tally:
        return
    parts = []
    for engine in ENGINES:
        counts = _state.tally.get(engine)
        if counts:
            parts.append(f"{engine}: " + ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())))
    terminalreporter.write_line("fdbqueue engines -- " + "; ".join(parts))


def cluster_file() -> str | None:
    """The run's cluster file, starting a local cluster the first time if need be; None: none."""
    if _state.resolved:
        return _state.cluster_file
    _state.resolved = True
    if _state.mode == "off":
        _state.problem = f"cluster runs are off ({ENV_MODE}=off)"
    elif os.environ.get(ENV_CLUSTER_FILE):
        _state.cluster_file = os.environ[ENV_CLUSTER_FILE]
    elif _state.problem is None:
        try:
            _state.started = LocalCluster(commit_latency=_state.commit_latency).start()
            _state.cluster_file = _state.started.cluster_file
        except (binaries.BinariesNotFound, ClusterError) as error:
            _state.problem = str(error)
    return _state.cluster_file


def client_library() -> str | None:
    """The client library this run loaded (for settings of child processes), if any."""
    return _state.library


def need_cluster() -> str:
    """The cluster file, or skip (fail under ``require``) the calling test with the reason."""
    path = cluster_file()
    if path is None:
        reason = f"no FoundationDB cluster: {_state.problem or 'none configured'}"
        if _state.mode == "require":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return path


def store_settings(engine: str, root: tuple[Any, ...], path: str | None = None) -> dict[str, Any]:
    """An FDBQUEUE dict for a fresh store of ``engine`` (``path``: the embedded file)."""
    if engine == "foundationdb":
        options: dict[str, Any] = {"ENGINE": "foundationdb", "CLUSTER_FILE": need_cluster(), "ROOT": root}
        if client_library():
            options["CLIENT_LIBRARY"] = client_library()
        return options
    return {"ENGINE": "embedded", "PATH": path, "ROOT": root}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fdbqueue_engine" not in metafunc.fixturenames:
        return
    chosen = metafunc.config.getoption("--fdbqueue-engines")
    names = [name.strip() for name in chosen.split(",")] if chosen else list(ENGINES)
    unknown = set(names) - set(ENGINES)
    if unknown:
        raise pytest.UsageError(f"--fdbqueue-engines: unknown engine(s) {sorted(unknown)}; use {ENGINES}")
    params = [pytest.param(name, marks=pytest.mark.cluster) if name == "foundationdb" else name for name in names]
    metafunc.parametrize("fdbqueue_engine", params, indirect=True)


@pytest.fixture
def fdbqueue_engine(request: pytest.FixtureRequest) -> str:
    """The engine of this run of the test (skipped or failed on a cluster run without a cluster)."""
    engine = getattr(request, "param", "embedded")
    if engine == "foundationdb":
        need_cluster()
    return engine


@pytest.fixture
def fdbqueue_cluster_file() -> str:
    return need_cluster()


@contextlib.contextmanager
def fresh_store(engine: str, settings: Any, path: str) -> Iterator[Any]:
    """Point ``settings.FDBQUEUE`` at a new store of ``engine`` (a new file at ``path``, or a new
    ``ROOT`` on the cluster, cleared afterwards) and yield the app's database handle."""
    from django_fdbqueue import connection

    root = ("fdbqueue-test", uuid.uuid4().hex)
    settings.FDBQUEUE = store_settings(engine, root, path)
    connection.reset_database()
    database = connection.get_database()
    try:
        yield database
    finally:
        if engine == "foundationdb":
            from django_fdbqueue.fdbapi import fdb

            space = fdb.Subspace(root)
            del database[space.range().start : space.range().stop]
        connection.reset_database()


NO_SETTINGS = (
    "fdbqueue_store needs your Django settings, through pytest-django: install pytest-django and "
    "name your settings module with DJANGO_SETTINGS_MODULE (or --ds, or DJANGO_SETTINGS_MODULE = ... "
    "under [pytest] in pytest.ini). Without them pytest-django would skip the test, and the run "
    "would pass having tested nothing."
)


def django_settings_found() -> bool:
    """Whether pytest-django can give this test its ``settings`` (as pytest-django decides it)."""
    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        return True
    from django.conf import settings

    return bool(settings.configured)


def django_settings(request: pytest.FixtureRequest) -> Any:
    """pytest-django's ``settings`` fixture; a failure that says what to do where it would skip."""
    if not django_settings_found():
        pytest.fail(NO_SETTINGS, pytrace=False)
    try:
        return request.getfixturevalue("settings")
    except pytest.FixtureLookupError:
        pytest.fail(NO_SETTINGS, pytrace=False)


@pytest.fixture
def fdbqueue_store(fdbqueue_engine: str, tmp_path: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh store for this test on ``fdbqueue_engine``: the app's database handle."""
    settings = django_settings(request)
    with fresh_store(fdbqueue_engine, settings, str(tmp_path / "fdbqueue.sqlite3")) as database:
        yield database
