"""Versionstamps: the 10 bytes a commit writes into stamped keys and values, and their futures.

A stamp is the commit version (8 bytes, big-endian) and a 2-byte batch order, always zero here
since every commit is alone in its batch.
"""

from __future__ import annotations

from django_fdbqueue.fdbapi import ErrorCode, make_error

from .futures import Future, Key

VERSIONSTAMP_SIZE = 10


def stamp_of(version: int) -> bytes:
    """The versionstamp of a commit at `version`."""
    return version.to_bytes(8, "big") + b"\x00\x00"


def with_stamp(body: bytes, offset: int, stamp: bytes) -> bytes:
    """`body` with the placeholder at `offset` replaced by `stamp`."""
    return body[:offset] + stamp + body[offset + VERSIONSTAMP_SIZE :]


def split_stamp_offset(data: bytes) -> tuple[bytes, int]:
    """Strip the 4-byte little-endian offset that ends a versionstamped key or value."""
    if len(data) < 4:
        raise make_error(ErrorCode.CLIENT_INVALID_OPERATION)
    body, offset = data[:-4], int.from_bytes(data[-4:], "little")
    if offset + VERSIONSTAMP_SIZE > len(body):
        raise make_error(ErrorCode.CLIENT_INVALID_OPERATION)
    return body, offset


def landing_range(body: bytes, offset: int, read_version: int | None) -> tuple[bytes, bytes]:
    """Where a versionstamped key may land: its stamp filled with the read version, to all ``\\xff``.

    Like the binding, the read version counts only if the transaction already has one: a blind
    insert takes none (and so can never be too old).
    """
    lowest = with_stamp(body, offset, (read_version or 0).to_bytes(8, "big") + b"\x00\x00")
    highest = with_stamp(body, offset, b"\xff" * VERSIONSTAMP_SIZE)
    return lowest, highest + b"\x00"


class VersionstampSlot:
    """Where a commit leaves its versionstamp for ``get_versionstamp()`` futures."""

    def __init__(self) -> None:
        self.stamp: bytes | None = None
        self.error: int | None = None

    def wait(self) -> Key:
        if self.stamp is not None:
            return Key(self.stamp)
        if self.error is not None:
            raise make_error(self.error)
        raise make_error(ErrorCode.CLIENT_INVALID_OPERATION)


class VersionstampFuture(Future):
    def __init__(self, slot: VersionstampSlot) -> None:
        super().__init__()
        self._slot = slot

    def wait(self) -> Key:
        return self._slot.wait()

    def is_ready(self) -> bool:
        return self._slot.stamp is not None or self._slot.error is not None

    # Key-like access, as the binding's Key future offers.
    @property
    def value(self) -> bytes:
        return self.wait().value  # type: ignore[return-value]
