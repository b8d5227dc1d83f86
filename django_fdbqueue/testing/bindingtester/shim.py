"""A stand-in ``fdb`` module that presents the embedded engine with the official binding's names.

The binding tester's driver and its Python tester ``import fdb``, call ``fdb.api_version`` and
``fdb.open``, and use the binding's tuple layer, subspaces, directory layer, key selectors,
futures and errors. :func:`install` puts a module of ours in ``sys.modules["fdb"]`` whose
``open`` returns an embedded database (the "cluster file" argument is the store's path), and
which serves the official package's pure-Python parts (``fdb.tuple``, ``fdb.subspace_impl``,
``fdb.directory_impl``) from that package's own folder: those run unchanged, on our
transactions. Only the C-backed part (``fdb.impl``) is replaced, by the names below.

Nothing here changes what the engine does: every difference the tester finds is fixed in the
engine, so applications see the fix too.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import types
from typing import Any

from django_fdbqueue.engines.embedded import EmbeddedDatabase, Transaction
from django_fdbqueue.engines.embedded.futures import Future as EngineFuture
from django_fdbqueue.engines.embedded.futures import Key, KeyValue, Value
from django_fdbqueue.engines.embedded.reads import StreamingMode
from django_fdbqueue.fdbapi import FDBError, KeySelector, latest_api_version, strinc, transactional

from . import EMBEDDED, ENGINE_ENV

#: The oldest API version the stand-in accepts: the engine follows the 7.x client's rules only.
MIN_API_VERSION = 710

_ENGINE_FUTURES = (EngineFuture, Value, Key)


class _FutureType(type):
    """``isinstance(x, fdb.Future)`` is true for the engine's futures, as for the binding's."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return issubclass(type(obj), _ENGINE_FUTURES)


class Future(metaclass=_FutureType):
    """What the tester asks ``isinstance`` about: any future the engine returns."""


class _Databases:
    """One database handle per path, as the binding keeps one per cluster file."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: dict[str, EmbeddedDatabase] = {}

    def get(self, path: str) -> EmbeddedDatabase:
        with self.lock:
            if path not in self.open:
                self.open[path] = EmbeddedDatabase(path)
            return self.open[path]


_databases = _Databases()


def open_database(cluster_file: str | None = None, event_model: Any = None) -> EmbeddedDatabase:
    """``fdb.open``: the embedded store whose path stands where a cluster file would."""
    if not cluster_file:
        raise RuntimeError("The embedded engine's stand-in needs the store's path as the cluster file.")
    return _databases.get(os.path.abspath(cluster_file))


def _impl_module() -> types.ModuleType:
    """``fdb.impl``: the names the pure-Python parts and the tester take from the C-backed module."""
    impl = types.ModuleType("fdb.impl")
    impl.__dict__.update(
        strinc=strinc,
        transactional=transactional,
        FDBError=FDBError,
        KeySelector=KeySelector,
        Future=Future,
        Value=Value,
        Key=Key,
        KeyValue=KeyValue,
        StreamingMode=StreamingMode,
        Database=EmbeddedDatabase,
        Transaction=Transaction,
        open=open_database,
    )
    return impl


def _official_folder() -> str:
    """The official ``fdb`` package's folder (its pure-Python modules are loaded from there)."""
    spec = importlib.util.find_spec("fdb")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("The foundationdb package (the official binding) is not installed.")
    return list(spec.submodule_search_locations)[0]


def build() -> types.ModuleType:
    """A new ``fdb`` module for the embedded engine (not yet in ``sys.modules``)."""
    import fdb.six
    import fdb.subspace_impl
    import fdb.tuple

    module = types.ModuleType("fdb", __doc__)
    module.__path__ = [_official_folder()]
    state: dict[str, int] = {}

    def api_version(ver: int) -> None:
        if state.get("version", ver) != ver:
            raise RuntimeError("FDB API already loaded at version %d" % state["version"])
        if ver > latest_api_version():
            raise RuntimeError("Latest known FDB API version is %d" % latest_api_version())
        if ver < MIN_API_VERSION:
            raise RuntimeError("The embedded engine follows API version %d or later, not %d" % (MIN_API_VERSION, ver))
        state["version"] = ver
        module._version = ver  # type: ignore[attr-defined]

    def get_api_version() -> int:
        if "version" not in state:
            raise RuntimeError("API version is not set")
        return state["version"]

    module.__dict__.update(
        LATEST_API_VERSION=latest_api_version(),
        api_version=api_version,
        get_api_version=get_api_version,
        is_api_version_selected=lambda: "version" in state,
        impl=_impl_module(),
        six=fdb.six,
        tuple=fdb.tuple,
        subspace_impl=fdb.subspace_impl,
        Subspace=fdb.subspace_impl.Subspace,
    )
    for name in ("FDBError", "Future", "KeySelector", "KeyValue", "StreamingMode", "transactional"):
        setattr(module, name, getattr(module.impl, name))
    module.open = open_database  # type: ignore[attr-defined]
    module.Database, module.Transaction = EmbeddedDatabase, Transaction  # type: ignore[attr-defined]
    return module


def install() -> types.ModuleType:
    """Make ``import fdb`` (and ``fdb.impl``, ``fdb.directory_impl``) the embedded engine's stand-in."""
    current = sys.modules.get("fdb")
    if getattr(current, "EMBEDDED_STAND_IN", False):
        return current  # type: ignore[return-value]
    module = build()
    module.EMBEDDED_STAND_IN = True  # type: ignore[attr-defined]
    sys.modules["fdb"] = module
    sys.modules["fdb.impl"] = module.impl
    # The directory layer, loaded afresh so that its ``from fdb import impl`` finds ours.
    sys.modules.pop("fdb.directory_impl", None)
    directory_impl = importlib.import_module("fdb.directory_impl")
    module.directory_impl = directory_impl  # type: ignore[attr-defined]
    module.directory = directory_impl.directory  # type: ignore[attr-defined]
    module.DirectoryLayer = directory_impl.DirectoryLayer  # type: ignore[attr-defined]
    return module


def install_if_asked() -> bool:
    """Install the stand-in when ``$FDBQUEUE_BINDINGTESTER_ENGINE`` says ``embedded``."""
    if os.environ.get(ENGINE_ENV) == EMBEDDED:
        install()
        return True
    return False
