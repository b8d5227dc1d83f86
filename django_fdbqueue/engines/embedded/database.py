"""The embedded engine's database handle: the entry point that creates transactions.

Shaped like the binding's ``fdb.Database``: ``create_transaction()``, plus the convenience
methods that each run one transaction with retries (``db[key]``, ``db[key] = value``,
``del db[begin:end]``, ``db.get_range(...)`` returning a list, atomic ops).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, cast

from django_fdbqueue.fdbapi import ErrorCode, make_error, transactional

from .faults import FaultConfig, FaultInjector
from .storage import Storage
from .transaction import Transaction
from .wakeup import CommitSignal
from .watches import Watcher, WatchFuture


class DatabaseOptions:
    """Database-wide defaults for every transaction (same names as the binding's options)."""

    def __init__(self, db: "EmbeddedDatabase") -> None:
        self._db = db

    def set_transaction_timeout(self, milliseconds: int) -> None:
        self._db._timeout = milliseconds / 1000.0 if milliseconds else None
        self._db._storage.lock_timeout = self._db._timeout  # for connections opened from now on

    def set_transaction_retry_limit(self, limit: int) -> None:
        self._db._retry_limit = None if limit is None or limit < 0 else limit

    def set_transaction_max_retry_delay(self, milliseconds: int) -> None:
        self._db._max_retry_delay = milliseconds / 1000.0


class EmbeddedDatabase:
    """A FoundationDB-compatible database kept in one SQLite file.

    `timeout` (seconds) and `retry_limit` apply to every transaction, like the binding's
    ``set_transaction_timeout`` / ``set_transaction_retry_limit``. `faults` makes a fraction
    of commits fail (see ``faults.FaultConfig``). `max_transaction_age` (FoundationDB's five
    seconds) and `clock` exist so tests can reach ``transaction_too_old`` without waiting.
    `watch_poll_interval` is how often watches also compare the store's version, besides the
    shared commit signal they check every few milliseconds (see ``wakeup``).
    """

    def __init__(
        self,
        path: str,
        *,
        timeout: float | None = None,
        retry_limit: int | None = None,
        faults: FaultConfig | Mapping[str, Any] | None = None,
        max_transaction_age: float = 5.0,
        max_retry_delay: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        watch_poll_interval: float = 0.05,
    ) -> None:
        self.path = str(path)
        self.max_transaction_age = max_transaction_age
        self._timeout = timeout
        self._retry_limit = retry_limit
        self._max_retry_delay = max_retry_delay
        self._clock = clock
        self._storage = Storage(self.path, history_seconds=max_transaction_age, lock_timeout=timeout)
        self._signal = CommitSignal(self.path)
        self._watcher = Watcher(self._storage, poll_interval=watch_poll_interval, signal=self._signal)
        self.faults = FaultInjector(faults)
        self.options = DatabaseOptions(self)
        #: Called by each transaction before it takes its read version and before it commits:
        #: the points where a simulation (``django_fdbqueue.testing.simulation``) lets another
        #: actor run first, so that transactions overlap in an order its seed picks.
        self.interleave: Callable[[str], None] | None = None

    def __repr__(self) -> str:
        return "<EmbeddedDatabase %s>" % self.path

    def create_transaction(self) -> Transaction:
        return Transaction(self)

    def close(self) -> None:
        """Cancel waiting watches and close the pooled SQLite connections.

        Transactions still open keep their connections until they end.
        """
        self._watcher.close()
        self._storage.close()
        self._signal.close()

    # -- one-transaction conveniences, as on fdb.Database --------------------------------
    def get(self, key: Any) -> bytes | None:
        return _get(self, key)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self.get_range(key.start, key.stop, reverse=(key.step == -1))
        return _get(self, key)

    def get_key(self, key_selector: Any) -> bytes:
        return _get_key(self, key_selector)

    def get_range(
        self, begin: Any, end: Any, limit: int = 0, reverse: bool = False, streaming_mode: Any = None
    ) -> list[Any]:
        return _get_range(self, begin, end, limit, reverse, streaming_mode)

    def get_range_startswith(self, prefix: bytes, *args: Any, **kwargs: Any) -> list[Any]:
        return _get_range_startswith(self, prefix, *args, **kwargs)

    def set(self, key: Any, value: Any) -> None:
        _set(self, key, value)

    def __setitem__(self, key: Any, value: Any) -> None:
        _set(self, key, value)

    def clear(self, key: Any) -> None:
        _clear(self, key)

    def clear_range(self, begin: Any, end: Any) -> None:
        _clear_range(self, begin, end)

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, slice):
            _clear_range(self, key.start, key.stop)
        else:
            _clear(self, key)

    def clear_range_startswith(self, prefix: Any) -> None:
        _clear_range_startswith(self, prefix)

    def get_and_watch(self, key: Any) -> tuple[bytes | None, WatchFuture]:
        """The key's value and a watch on it, from one transaction."""
        return _get_and_watch(self, key)

    def set_and_watch(self, key: Any, value: Any) -> WatchFuture:
        return _set_and_watch(self, key, value)

    def clear_and_watch(self, key: Any) -> WatchFuture:
        return _clear_and_watch(self, key)

    # Every mutation of a transaction, in a transaction of its own, as the binding's database has.
    def add(self, key: Any, param: Any) -> None:
        _atomic(self, "add", key, param)

    def max(self, key: Any, param: Any) -> None:
        _atomic(self, "max", key, param)

    def min(self, key: Any, param: Any) -> None:
        _atomic(self, "min", key, param)

    def bit_and(self, key: Any, param: Any) -> None:
        _atomic(self, "bit_and", key, param)

    def bit_or(self, key: Any, param: Any) -> None:
        _atomic(self, "bit_or", key, param)

    def bit_xor(self, key: Any, param: Any) -> None:
        _atomic(self, "bit_xor", key, param)

    def byte_max(self, key: Any, param: Any) -> None:
        _atomic(self, "byte_max", key, param)

    def byte_min(self, key: Any, param: Any) -> None:
        _atomic(self, "byte_min", key, param)

    def compare_and_clear(self, key: Any, param: Any) -> None:
        _atomic(self, "compare_and_clear", key, param)

    def append_if_fits(self, key: Any, param: Any) -> None:
        _atomic(self, "append_if_fits", key, param)

    def set_versionstamped_key(self, key: Any, value: Any) -> None:
        _atomic(self, "set_versionstamped_key", key, value)

    def set_versionstamped_value(self, key: Any, value: Any) -> None:
        _atomic(self, "set_versionstamped_value", key, value)

    def open_tenant(self, name: Any) -> Any:
        """Tenants are left out of the embedded engine: refused as a cluster without them does."""
        raise make_error(ErrorCode.TENANTS_DISABLED)


# The conveniences above pass the database; `transactional` hands these a transaction of it.
# One annotation cannot say both, so `tr` is Any, as in the service.
@transactional
def _get(tr: Any, key: Any) -> bytes | None:
    return cast("bytes | None", tr[key].value)


@transactional
def _get_key(tr: Any, key_selector: Any) -> bytes:
    return cast(bytes, tr.get_key(key_selector).value)


@transactional
def _get_range(tr: Any, begin: Any, end: Any, limit: int, reverse: bool, streaming_mode: Any) -> list[Any]:
    return cast("list[Any]", tr.get_range(begin, end, limit, reverse, streaming_mode).to_list())


@transactional
def _get_range_startswith(tr: Any, prefix: Any, *args: Any, **kwargs: Any) -> list[Any]:
    return cast("list[Any]", tr.get_range_startswith(prefix, *args, **kwargs).to_list())


@transactional
def _set(tr: Any, key: Any, value: Any) -> None:
    tr[key] = value


@transactional
def _clear(tr: Any, key: Any) -> None:
    del tr[key]


@transactional
def _clear_range(tr: Any, begin: Any, end: Any) -> None:
    tr.clear_range(begin, end)


@transactional
def _clear_range_startswith(tr: Any, prefix: Any) -> None:
    tr.clear_range_startswith(prefix)


@transactional
def _get_and_watch(tr: Any, key: Any) -> tuple[bytes | None, WatchFuture]:
    return tr[key].value, tr.watch(key)


@transactional
def _set_and_watch(tr: Any, key: Any, value: Any) -> WatchFuture:
    tr[key] = value
    return cast(WatchFuture, tr.watch(key))


@transactional
def _clear_and_watch(tr: Any, key: Any) -> WatchFuture:
    del tr[key]
    return cast(WatchFuture, tr.watch(key))


@transactional
def _atomic(tr: Any, name: str, key: Any, param: Any) -> None:
    getattr(tr, name)(key, param)
