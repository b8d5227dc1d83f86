"""Reads: the read methods a transaction and its snapshot share, and the merge of stored rows
with the transaction's own writes that every range read and key selector goes through."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from django_fdbqueue.fdbapi import ErrorCode, FDBError, strinc

from .futures import Future, Key, KeyValue, RangeResult, Value
from .keys import key_bytes

if TYPE_CHECKING:
    from .write_cache import WriteCache

# Rows a range read fetches when get_range is called, before anyone iterates it.
FIRST_BATCH_ROWS = 100


class StreamingMode:
    """FoundationDB's streaming modes, with the binding's values.

    They tell a cluster how many rows to send per batch; the embedded engine reads in its own
    batches whatever the mode, but checks the mode as the client does (``streaming_mode_error``).
    """

    want_all = -2
    iterator = -1
    exact = 0
    small = 1
    medium = 2
    large = 3
    serial = 4


def streaming_mode_error(mode: Any, limit: int) -> int | None:
    """The error code the client gives a range read in ``mode`` with ``limit`` (None: no error).

    ``exact`` without a limit is refused (2210, exact_mode_without_limits), and so is a number
    that names no mode (2000, client_invalid_operation). None is the binding's default, iterator.
    """
    if mode is None:
        return None
    mode = int(mode)
    if mode == StreamingMode.exact and not limit:
        return ErrorCode.EXACT_MODE_WITHOUT_LIMITS
    if not StreamingMode.want_all <= mode <= StreamingMode.serial:
        return ErrorCode.CLIENT_INVALID_OPERATION
    return None


class Reader(Protocol):
    """What the read methods need of their transaction (``transaction.Transaction`` is the one):
    named here so that this module does not import the transaction's, which imports it."""

    db: Any

    def _read_key(self, key: bytes, snapshot: bool) -> bytes | None: ...

    def _resolve_selector(self, selector: Any, snapshot: bool) -> bytes: ...

    def _range(
        self, begin: Any, end: Any, limit: int, reverse: bool, snapshot: bool, streaming_mode: Any = None
    ) -> RangeResult: ...

    def _ensure_read_version(self) -> int: ...

    def _hand_out_read_version(self) -> int: ...


class ReadView:
    """The read methods, shared by a transaction and its ``snapshot`` view."""

    _tr: Reader
    _snapshot: bool

    def get(self, key: Any) -> Value:
        return Value(self._tr._read_key(key_bytes(key), self._snapshot))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self.get_range(key.start, key.stop, reverse=(key.step == -1))
        return self.get(key)

    def get_key(self, key_selector: Any) -> Key:
        return Key(self._tr._resolve_selector(key_selector, self._snapshot))

    def get_range(
        self, begin: Any, end: Any, limit: int = 0, reverse: bool = False, streaming_mode: Any = None
    ) -> RangeResult:
        return self._tr._range(begin, end, limit, reverse, self._snapshot, streaming_mode)

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> RangeResult:
        prefix = key_bytes(prefix)
        return self.get_range(prefix, strinc(prefix), *args, **kwargs)

    def get_read_version(self) -> Future:
        return Future(self._tr._hand_out_read_version())


class Snapshot(ReadView):
    """``tr.snapshot``: the same reads (own writes included) with no read conflict ranges."""

    def __init__(self, tr: Reader) -> None:
        self._tr = tr
        self._snapshot = True
        self.db = tr.db


def merged_rows(
    cache: "WriteCache",
    stored: Iterator[tuple[bytes, bytes]],
    local: list[bytes],
    reverse: bool,
    unreadable_at: bytes | None,
    check: Callable[[], None],
    unreadable: Callable[[], Exception],
) -> Iterator[tuple[bytes, bytes]]:
    """Stored rows overlaid with the transaction's own writes, in scan order, lazily.

    `local` is the written keys of the scanned range in scan order; `unreadable_at` where the scan
    first meets a range a versionstamped key may land in (reading there fails, as does reading a
    key written with a versionstamped value). `check` runs before each step, so a scan stops as
    soon as its attempt has ended; `unreadable` makes the error a read of an unknowable key raises.
    Keys whose value is None (cleared, or deleted by an operation) are skipped.
    """
    ahead: Callable[[bytes, bytes], bool] = (lambda a, b: a > b) if reverse else (lambda a, b: a < b)
    row = next(stored, None)
    index = 0
    # A consumed stored row is replaced only when the next step needs it: a reader that stops
    # after the rows it wanted (a limit of 1) must not make the scan fetch another batch.
    consumed = False
    while True:
        if consumed:
            row, consumed = next(stored, None), False
        if row is None and index >= len(local):
            break
        check()
        mine = local[index] if index < len(local) else None
        upcoming = mine if row is None or (mine is not None and ahead(mine, row[0])) else row[0]
        if unreadable_at is not None:
            assert upcoming is not None  # the loop ended when both sources did
            if upcoming < unreadable_at if reverse else upcoming >= unreadable_at:
                raise unreadable()
        if mine is None or (row is not None and ahead(row[0], mine)):
            key, value = row  # type: ignore[misc]
            consumed = True
            if cache.cleared(key):
                value = None
        else:
            if mine in cache.unreadable_keys:
                raise unreadable()
            key, base = mine, None
            if row is not None and row[0] == mine:
                base = row[1]
                consumed = True
            index += 1
            value = cache.resolve(key, base)
        if value is not None:
            yield key, value
    if unreadable_at is not None:
        raise unreadable()  # the rest of the range is unknowable


def read_ahead(rows: Iterator[KeyValue], count: int, check: Callable[[], None]) -> Iterator[KeyValue]:
    """Read up to `count` rows of a range now; hand them out (or the read's error) when iterated.

    `check` runs before each row is handed out, so rows read ahead are not served once their
    transaction attempt has ended, just as rows still to be read are not.
    """
    buffered: list[KeyValue] = []
    failure: BaseException | None = None
    try:
        for row in rows:
            buffered.append(row)
            if len(buffered) >= count:
                break
    except FDBError as error:
        failure = error

    def serve() -> Iterator[KeyValue]:
        for row in buffered:
            check()
            yield row
        if failure is not None:
            raise failure
        yield from rows

    return serve()
