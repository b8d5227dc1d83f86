"""FoundationDB's error codes as this app uses them, and the process's one ``FDBError`` type."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from . import binding
import fdb


class ErrorCode:
    """FoundationDB error codes this app raises, retries or maps (names as in FoundationDB)."""

    TRANSACTION_TOO_OLD = 1007
    FUTURE_VERSION = 1009
    NOT_COMMITTED = 1020
    COMMIT_UNKNOWN_RESULT = 1021
    TRANSACTION_CANCELLED = 1025
    TRANSACTION_TIMED_OUT = 1031
    TOO_MANY_WATCHES = 1032
    ACCESSED_UNREADABLE = 1036
    PROCESS_BEHIND = 1037
    DATABASE_LOCKED = 1038
    CLUSTER_VERSION_CHANGED = 1039
    OPERATION_CANCELLED = 1101
    CLIENT_INVALID_OPERATION = 2000
    KEY_OUTSIDE_LEGAL_RANGE = 2004
    READ_VERSION_ALREADY_SET = 2010
    VERSION_INVALID = 2011
    INVERTED_RANGE = 2005
    USED_DURING_COMMIT = 2017
    NO_COMMIT_VERSION = 2021
    TRANSACTION_TOO_LARGE = 2101
    KEY_TOO_LARGE = 2102
    VALUE_TOO_LARGE = 2103
    SPECIAL_KEYS_WRITE_DISABLED = 2114
    SPECIAL_KEYS_NO_MODULE_FOUND = 2115
    TENANTS_DISABLED = 2136
    EXACT_MODE_WITHOUT_LIMITS = 2210


# Codes on which `Transaction.on_error` backs off and retries (FoundationDB's retryable set).
RETRYABLE_CODES = frozenset(
    {
        ErrorCode.TRANSACTION_TOO_OLD,
        ErrorCode.FUTURE_VERSION,
        ErrorCode.NOT_COMMITTED,
        ErrorCode.COMMIT_UNKNOWN_RESULT,
        ErrorCode.PROCESS_BEHIND,
        ErrorCode.DATABASE_LOCKED,
        1042,  # commit_proxy_memory_limit_exceeded
        1051,  # batch_transaction_throttled
        1078,  # grv_proxy_memory_limit_exceeded
        1213,  # tag_throttled
    }
)

# Codes after which a commit may or may not have happened: FoundationDB's "maybe committed" pair
# (1021, 1039), which `on_error` retries, and a timeout or cancellation, which can end the wait for
# a commit still in flight and reach the caller (1031 also from the wait bound, wait_bound.py).
IN_DOUBT_CODES = frozenset(
    {
        ErrorCode.COMMIT_UNKNOWN_RESULT,
        ErrorCode.CLUSTER_VERSION_CHANGED,
        ErrorCode.TRANSACTION_TIMED_OUT,
        ErrorCode.TRANSACTION_CANCELLED,
    }
)


def commit_in_doubt(error: BaseException) -> bool:
    """Does ``error``, raised by an operation that writes, leave unknown whether it committed?

    Then retry the same call: the service's operations answer a retry as if the first attempt
    had applied, or say what a blind retry costs (docs: errors, "Commits in doubt").
    """
    return getattr(error, "code", None) in IN_DOUBT_CODES


# Descriptions used when the client library (which owns the real texts) is not loaded.
DESCRIPTIONS = {
    1007: "Transaction is too old to perform reads or be committed",
    1009: "Request for future version",
    1020: "Transaction not committed due to conflict with another transaction",
    1021: "Transaction may or may not have committed",
    1025: "Operation aborted because the transaction was cancelled",
    1031: "Operation aborted because the transaction timed out",
    1032: "Too many watches currently set",
    1036: "Read or wrote an unreadable key",
    1037: "Storage process does not have recent mutations",
    1038: "Database is locked",
    1039: "The protocol version of the cluster has changed",
    1101: "Asynchronous operation cancelled",
    2000: "Invalid API call",
    2004: "Key outside legal range",
    2005: "Range begin key larger than end key",
    2010: "Transaction already has a read version set",
    2011: "Version not valid",
    2017: "Operation issued while a commit was outstanding",
    2021: "Transaction has no commit version",
    2101: "Transaction exceeds byte limit",
    2102: "Key length exceeds limit",
    2103: "Value length exceeds limit",
    2114: "Special Key space is not allowed to write by default. Refer to the "
    "`special_key_space_enable_writes` transaction option for more details.",
    2115: "Special key space key or keyrange in set or clear does not intersect a module",
    2136: "Tenants have been disabled in the cluster",
    2210: "EXACT streaming mode requires limits, but none were given",
}


class _PurePythonFDBError(Exception):
    """Stand-in for ``fdb.FDBError`` when the client library is absent: same attributes."""

    def __init__(self, code: int, description: str | None = None) -> None:
        super().__init__(code)
        self.code = code
        self._description = description

    @property
    def description(self) -> str:
        return self._description or DESCRIPTIONS.get(self.code, "Unknown error")

    def __str__(self) -> str:
        return "%s (%d)" % (self.description, self.code)

    def __repr__(self) -> str:
        return "FDBError(%d)" % self.code


if TYPE_CHECKING:  # what type checkers see: the stand-in has the binding's attributes
    FDBError = _PurePythonFDBError
elif binding.impl is not None:
    FDBError = binding.impl.FDBError
else:
    FDBError = _PurePythonFDBError


def make_error(code: int) -> Exception:
    """Build the process's one FDBError type for `code` (used by the embedded engine).

    The binding's FDBError asks the C library for its description, which only works once an
    API version is selected; until then (the embedded engine on a machine that also has the
    client library) we give it ours.
    """
    error = FDBError(code)
    if binding.impl is not None and not fdb.is_api_version_selected():
        error._description = DESCRIPTIONS.get(code, "Unknown error")
    return error


def describe(error: BaseException) -> str:
    """FoundationDB's text for `error`, always as ``str``.

    The binding's ``FDBError.description`` comes from the C library as ``bytes`` (and needs an
    API version selected); messages shown to people should use this instead.
    """
    try:
        text: Any = error.description  # type: ignore[attr-defined]
    except Exception:  # no description attribute, or the C library could not be asked
        text = None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text:
        text = DESCRIPTIONS.get(getattr(error, "code", None), str(error))  # type: ignore[arg-type]
    return cast(str, text)
