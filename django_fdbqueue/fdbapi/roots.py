"""The root subspace a database handle was opened for, recorded on the handle by the engines."""

from __future__ import annotations

import functools
from typing import Any

from .binding import Subspace, is_transaction

# -- the root subspace a handle was opened for -------------------------------------------------
#
# The app keeps every key under FDBQUEUE['ROOT']. The code that opens a handle (the engines) records
# that root on it, and the service reads it back from what it is given, a database or a transaction
# of one, so the service never asks where its handle came from. Each handle the engines open is its
# own object (the foundationdb engine does not use the handle ``fdb.open`` shares per cluster file),
# so two stores on one cluster under different ROOTs never see each other's root.

_ROOT_ATTRIBUTE = "fdbqueue_root"


@functools.lru_cache(maxsize=64)
def subspace_of(root: tuple[Any, ...]) -> Any:
    """The ``Subspace`` of a ROOT tuple, made once per value (every operation asks for it)."""
    return Subspace(root)


def attach_root(database: Any, root: tuple[Any, ...]) -> None:
    """Record on ``database`` that the app's keys live under ``root`` there."""
    setattr(database, _ROOT_ATTRIBUTE, subspace_of(root))


def root_of(db_or_tr: Any) -> Any:
    """The root subspace attached to this database, or to the database of this transaction.

    None for a handle the engines did not open (a project's own ``fdb.open()``, a tenant): the
    caller then decides (the service uses the configured ROOT).
    """
    handle = getattr(db_or_tr, "db", None) if is_transaction(db_or_tr) else db_or_tr
    return getattr(handle, _ROOT_ATTRIBUTE, None)
