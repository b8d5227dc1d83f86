"""The part of the FoundationDB Python API that both engines share.

Service code imports FoundationDB names from here and nowhere else, so it runs unchanged on the
real cluster (official binding) and on the embedded engine: ``fdb`` (the official package, for
its pure-Python tuple layer and ``fdb.Subspace``, so keys are byte-identical on both engines),
``FDBError`` (one exception type per process, which ``except FDBError`` catches from either
engine), ``KeySelector``, ``transactional``, and ``tuples`` (the tuple layer's pack and unpack
for the kinds of element the service's keys hold, faster, byte for byte the same). The binding is loaded once, with pure-Python
stand-ins when its C library cannot be (``binding.py``).

Why each name is what it is: the code map, ``fdbapi/`` (docs/explanation/code-map.md), and the
docs' embedded engine page (docs/explanation/embedded-engine.md).
"""

from __future__ import annotations

import fdb

from .binding import (
    CLIENT_LIBRARY_AVAILABLE,
    KeySelector,
    Subspace,
    is_transaction,
    latest_api_version,
    strinc,
)
from .errors import IN_DOUBT_CODES, RETRYABLE_CODES, ErrorCode, FDBError, commit_in_doubt, describe, make_error
from .protocols import Database, DatabaseOrTransaction, ReadTransaction, Transaction
from .retrying import (
    REUSE_VERSION_SECONDS,
    at_reused_version,
    choice_reads,
    count_retry,
    remember_commit,
    retry_counts,
    transactional,
    vouch,
)
from .roots import attach_root, root_of, subspace_of
from . import tuples
from .waits import bounded, bounded_waits, wait_bound

__all__ = [
    "CLIENT_LIBRARY_AVAILABLE",
    "IN_DOUBT_CODES",
    "REUSE_VERSION_SECONDS",
    "RETRYABLE_CODES",
    "Database",
    "DatabaseOrTransaction",
    "ErrorCode",
    "FDBError",
    "KeySelector",
    "ReadTransaction",
    "Subspace",
    "Transaction",
    "at_reused_version",
    "attach_root",
    "bounded",
    "bounded_waits",
    "choice_reads",
    "commit_in_doubt",
    "count_retry",
    "describe",
    "fdb",
    "is_transaction",
    "latest_api_version",
    "make_error",
    "remember_commit",
    "retry_counts",
    "root_of",
    "strinc",
    "subspace_of",
    "transactional",
    "tuples",
    "vouch",
    "wait_bound",
]
