"""Reads at a read version set by hand (``set_read_version``) older than the store's.

The store keeps only the newest value of each key, so it cannot show the database as it was at
an older version in general. It can for every key no commit changed since then: those read the
same at both versions. The conflict history (``storage``) says which ranges commits wrote since
a version, while it lasts: reads there are answered from the current snapshot, and reads that
reach a changed range fail with 1007 (transaction_too_old), the error a cluster gives for a
version whose data it no longer keeps. A version newer than the store's fails with 1009
(future_version), as a cluster's reads do once they have waited for it in vain.

A write made after ``set_next_write_no_write_conflict_range`` leaves no range in the history,
so a read at an older version does not see that it changed: the one case this cannot tell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django_fdbqueue.fdbapi import ErrorCode, make_error

from .conflicts import merge_ranges


@dataclass
class PastView:
    """What a transaction whose read version is ``version`` may read from the current snapshot."""

    version: int
    #: Every read fails with this code (1007: history gone; 1009: a future version), if set.
    error: int | None = None
    #: Ranges commits newer than ``version`` wrote (sorted, merged).
    changed: list[tuple[bytes, bytes]] = field(default_factory=list)

    @classmethod
    def at(cls, version: int, current: int, pruned_through: int, changed: list[tuple[bytes, bytes]]) -> "PastView":
        """The view of ``version`` from a snapshot at ``current``."""
        if version > current:
            return cls(version, ErrorCode.FUTURE_VERSION)
        if version < pruned_through:
            return cls(version, ErrorCode.TRANSACTION_TOO_OLD)
        return cls(version, None, merge_ranges(changed))

    def check(self, begin: bytes, end: bytes) -> None:
        """Raise if a read of ``[begin, end)`` cannot be answered as of ``version``."""
        if self.error is not None:
            raise make_error(self.error)
        for changed_begin, changed_end in self.changed:
            if changed_begin >= end:
                break
            if begin < changed_end:
                raise make_error(ErrorCode.TRANSACTION_TOO_OLD)
