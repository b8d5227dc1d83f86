"""The official binding, loaded once: its C-backed part when the client library is there, and
pure-Python stand-ins where it is not (a key selector; the versionstamp trap defused).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, cast

import fdb
import fdb.subspace_impl
import fdb.tuple

from django_fdbqueue import clientlib


def _load_binding_impl() -> types.ModuleType | None:
    """Import the binding's C-backed module, or return None when libfdb_c is not installed."""
    try:
        import fdb.impl as impl
    except Exception:  # the binding raises a bare Exception when it cannot find the library
        return None
    return cast(types.ModuleType, impl)


clientlib.preload()  # FDBQUEUE['CLIENT_LIBRARY'], loaded before the binding looks for it by name
#: The binding's C-backed module, or None without the client library.
impl = _load_binding_impl()
CLIENT_LIBRARY_AVAILABLE: bool = impl is not None


class _PurePythonKeySelector:
    """Stand-in for ``fdb.KeySelector``: the key, whether it is included, and an offset."""

    def __init__(self, key: bytes, or_equal: bool, offset: int) -> None:
        self.key = key
        self.or_equal = or_equal
        self.offset = offset

    def __add__(self, offset: int) -> "_PurePythonKeySelector":
        return type(self)(self.key, self.or_equal, self.offset + offset)

    def __sub__(self, offset: int) -> "_PurePythonKeySelector":
        return type(self)(self.key, self.or_equal, self.offset - offset)

    @classmethod
    def last_less_than(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, False, 0)

    @classmethod
    def last_less_or_equal(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, True, 0)

    @classmethod
    def first_greater_than(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, True, 1)

    @classmethod
    def first_greater_or_equal(cls, key: bytes) -> "_PurePythonKeySelector":
        return cls(key, False, 1)

    def __repr__(self) -> str:
        return "KeySelector(%r, %r, %r)" % (self.key, self.or_equal, self.offset)


if TYPE_CHECKING:  # what type checkers see: the stand-in has the binding's attributes
    KeySelector = _PurePythonKeySelector
elif impl is not None:
    KeySelector = impl.KeySelector
else:
    KeySelector = _PurePythonKeySelector


def _defuse_versionstamp_trap() -> None:
    """Let ``fdb.tuple.pack_with_versionstamp`` run without the C library.

    ``Versionstamp.to_bytes()`` asks ``isinstance(tr_version, fdb.impl.Value)``, only to unwrap
    a future that the real binding may hand it. Without the library ``fdb.impl`` cannot exist,
    so the attribute lookup fails. We give the package an ``impl`` attribute whose ``Value`` no
    object is an instance of: the check is then simply false, as it is for every plain bytes
    value. ``import fdb.impl`` still fails loudly (the placeholder is not in ``sys.modules``), so
    the real engine's "install the client library" error is unaffected.
    """
    if impl is None and not hasattr(fdb, "impl"):

        class _NoFutureValue:
            """Nothing is an instance of this: there are no binding futures without the library."""

        fdb.impl = types.SimpleNamespace(Value=_NoFutureValue)


_defuse_versionstamp_trap()

# `fdb.Subspace` is only published by `fdb.api_version()`; the class itself is pure Python.
Subspace = fdb.subspace_impl.Subspace
if not hasattr(fdb, "Subspace"):
    fdb.Subspace = Subspace  # type: ignore[misc]


#: The 7.1 binding's API version: the fallback for bindings that do not publish their latest one.
_BINDING_FALLBACK_API_VERSION = 710


def latest_api_version() -> int:
    """The newest API version the installed binding accepts (730 for the 7.3 binding).

    Pure Python (the package's constant): settings are checked against it without the C library.
    """
    return int(getattr(fdb, "LATEST_API_VERSION", _BINDING_FALLBACK_API_VERSION))


def strinc(key: bytes) -> bytes:
    """The first key after every key that starts with `key` (FoundationDB's ``strinc``)."""
    stripped = key.rstrip(b"\xff")
    if not stripped:
        raise ValueError("Key must contain at least one byte not equal to 0xFF.")
    return stripped[:-1] + bytes([stripped[-1] + 1])


def is_transaction(obj: Any) -> bool:
    """True for an open transaction (or snapshot view) of either engine, False for a database.

    Databases and tenants of both engines create transactions; transactions do not.
    """
    return not hasattr(obj, "create_transaction")
