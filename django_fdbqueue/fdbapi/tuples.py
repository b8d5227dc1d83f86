"""The tuple layer's ``pack`` and ``unpack`` for the elements the service's keys are made of, faster.

Every operation packs and unpacks a dozen keys, and the binding's pure-Python tuple layer
(``fdb.tuple``) is general: each element goes through a chain of type tests, a generator and a
list join. The service's keys hold only a few kinds of element: integers, text, bytes, None,
booleans and complete versionstamps. :func:`pack` encodes exactly those, and hands any tuple
holding anything else (floats, UUIDs, nested tuples, integers of more than eight bytes, an
incomplete versionstamp, a subclass of a built-in type) to ``fdb.tuple.pack`` whole. So the bytes are
always the binding's own: ``tests/test_tuples.py`` compares the two on every kind of element
and its edges.

:func:`unpack` reads the same kinds back, and hands the whole key to ``fdb.tuple.unpack`` at
the first element code it does not know: it is for keys the service wrote (and read back from
the store), not for bytes a user sent (tokens keep the binding's decoder, with its errors).

:class:`QuickSubspace` is ``fdb.Subspace`` with these two: what the service's per-queue key
layout (``service/_internals/keys.py``) is made of.
"""

from __future__ import annotations

from typing import Any

import fdb.tuple

from .binding import Subspace

__all__ = ["QuickSubspace", "pack", "unpack"]

_Versionstamp = fdb.tuple.Versionstamp
_binding_pack = fdb.tuple.pack
_binding_unpack = fdb.tuple.unpack
# The largest magnitude the one-code integer encodings hold (eight bytes); the binding switches
# to its length-prefixed encoding at this value itself.
_INT_LIMIT = (1 << 64) - 1
_INT_CODES = {n: bytes([0x14 + n]) for n in range(-8, 9)}
_NONE, _FALSE, _TRUE, _STAMP = b"\x00", b"\x26", b"\x27", b"\x33"
_BYTES, _TEXT, _END = b"\x01", b"\x02", b"\x00"
_UNSET = b"\xff" * 10  # the transaction version of an incomplete versionstamp


def _element(value: Any) -> bytes | None:
    """One element's encoding, or None when the binding must encode the tuple."""
    kind = type(value)
    if kind is int:
        number: int = value
        if number > 0:
            if number >= _INT_LIMIT:
                return None
            n = (number.bit_length() + 7) >> 3
            return _INT_CODES[n] + number.to_bytes(n, "big")
        if number == 0:
            return b"\x14"
        if -number >= _INT_LIMIT:
            return None
        n = ((-number).bit_length() + 7) >> 3
        return _INT_CODES[-n] + (number + (1 << (8 * n)) - 1).to_bytes(n, "big")
    if kind is str:
        text: str = value
        return _TEXT + text.encode("utf-8").replace(b"\x00", b"\x00\xff") + _END
    if kind is bytes:
        raw: bytes = value
        return _BYTES + raw.replace(b"\x00", b"\x00\xff") + _END
    if kind is _Versionstamp:
        tr_version, user_version = value.tr_version, value.user_version
        if type(tr_version) is bytes and len(tr_version) == 10 and type(user_version) is int:
            if 0 <= user_version <= 0xFFFF:
                return _STAMP + tr_version + user_version.to_bytes(2, "big")
        return None
    if value is None:
        return _NONE
    if kind is bool:
        return _TRUE if value else _FALSE
    return None


def pack(t: tuple[Any, ...], prefix: bytes = b"") -> bytes:
    """``fdb.tuple.pack(t, prefix)``, byte for byte."""
    if type(t) is not tuple:
        return _binding_pack(t, prefix=prefix)
    parts = [prefix]
    for value in t:
        encoded = _element(value)
        if encoded is None:
            return _binding_pack(t, prefix=prefix)
        parts.append(encoded)
    return b"".join(parts)


def _stamp(tr_version: bytes, user_version: int) -> Any:
    """``Versionstamp(tr_version, user_version)`` for parts known to be valid (ten bytes, and two
    bytes' worth): the same object, without the constructor's checks, which cost more than the rest
    of unpacking a key."""
    stamp = object.__new__(_Versionstamp)
    stamp.tr_version = tr_version
    stamp.user_version = user_version
    return stamp


def _terminated(key: bytes, start: int, size: int) -> tuple[bytes, int]:
    """The bytes of a text or bytes element from ``start`` (unescaped), and where the next begins."""
    end = key.find(b"\x00", start)
    if end < 0:
        return key[start:], size + 1
    if end + 1 == size or key[end + 1] != 0xFF:  # no escaped zero byte inside: the common case
        return key[start:end], end + 1
    while end >= 0 and end + 1 < size and key[end + 1] == 0xFF:
        end = key.find(b"\x00", end + 2)
    if end < 0:
        end = size
    return key[start:end].replace(b"\x00\xff", b"\x00"), end + 1


def unpack(key: bytes, prefix_len: int = 0) -> tuple[Any, ...]:
    """``fdb.tuple.unpack(key, prefix_len)`` for keys of the kinds :func:`pack` writes."""
    if type(key) is not bytes:
        return _binding_unpack(key, prefix_len=prefix_len)
    out: list[Any] = []
    append = out.append
    pos, size = prefix_len, len(key)
    while pos < size:
        code = key[pos]
        if 0x14 <= code <= 0x1C:
            end = pos + code - 0x13
            if end > size:
                break
            append(int.from_bytes(key[pos + 1 : end], "big"))
            pos = end
        elif code == 0x02:
            raw, pos = _terminated(key, pos + 1, size)
            append(raw.decode("utf-8"))
        elif code == 0x01:
            raw, pos = _terminated(key, pos + 1, size)
            append(raw)
        elif code == 0x33 and pos + 13 <= size and key[pos + 1 : pos + 11] != _UNSET:
            append(_stamp(key[pos + 1 : pos + 11], int.from_bytes(key[pos + 11 : pos + 13], "big")))
            pos += 13
        elif 0x0C <= code < 0x14:
            end = pos + 0x15 - code
            if end > size:
                break
            append(int.from_bytes(key[pos + 1 : end], "big") - ((1 << (8 * (0x14 - code))) - 1))
            pos = end
        elif code == 0x00:
            append(None)
            pos += 1
        elif code == 0x26 or code == 0x27:
            append(code == 0x27)
            pos += 1
        else:
            break
    else:
        return tuple(out)
    return _binding_unpack(key, prefix_len=prefix_len)  # a kind of element not read here


class QuickSubspace(Subspace):
    """``fdb.Subspace`` packing and unpacking through this module; its subspaces are quick too."""

    def __init__(self, prefixTuple: tuple[Any, ...] = (), rawPrefix: bytes = b"") -> None:  # noqa: N803 - the binding's names
        self.rawPrefix = pack(prefixTuple, rawPrefix)

    def __getitem__(self, name: Any) -> "QuickSubspace":
        return QuickSubspace((name,), self.rawPrefix)

    def subspace(self, t: tuple[Any, ...]) -> "QuickSubspace":
        return QuickSubspace(t, self.rawPrefix)

    def pack(self, t: tuple[Any, ...] = ()) -> bytes:
        return pack(t, self.rawPrefix)

    def unpack(self, key: bytes) -> tuple[Any, ...]:
        if not key.startswith(self.rawPrefix):
            raise ValueError("Cannot unpack key that is not in subspace.")
        return unpack(key, len(self.rawPrefix))

    def range(self, t: tuple[Any, ...] = ()) -> slice:
        if type(t) is not tuple:
            return super().range(t)
        p = pack(t, self.rawPrefix)
        return slice(p + b"\x00", p + b"\xff")
