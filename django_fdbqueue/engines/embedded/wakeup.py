"""Cross-process commit signals for the embedded engine's watches: one shared-memory word.

A watch must notice commits made by other processes quickly, without asking SQLite in a loop.
Every commit writes its version into an 8-byte word of a small file beside the store
(``<store>-wake``), mapped into memory by every process that opened the store; a watcher thread
compares that word with what it last saw every couple of milliseconds, which costs a memory read,
not a system call or a query. The word only says "something committed": watches then read the
store to see whether *their* key changed. Writers racing each other may leave either version in
the word; any change of the word is enough to make the watchers look.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import cast

_WORD = struct.Struct("<Q")


class CommitSignal:
    """The shared word of one store file (or nothing, when the file cannot be made)."""

    def __init__(self, store_path: str) -> None:
        self._map: mmap.mmap | None = None
        try:
            fd = os.open(store_path + "-wake", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return  # a read-only directory: watches fall back to polling the store's version
        try:
            if os.fstat(fd).st_size < _WORD.size:
                os.ftruncate(fd, _WORD.size)
            self._map = mmap.mmap(fd, _WORD.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError):
            self._map = None
        finally:
            os.close(fd)

    @property
    def available(self) -> bool:
        return self._map is not None

    def publish(self, version: int) -> None:
        """Tell every process's watchers that `version` committed."""
        if self._map is not None:
            self._map[: _WORD.size] = _WORD.pack(version & 0xFFFF_FFFF_FFFF_FFFF)

    def read(self) -> int | None:
        """The last published version (None without the shared word)."""
        if self._map is None:
            return None
        return cast(int, _WORD.unpack(self._map[: _WORD.size])[0])

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
