"""The per-transaction options the embedded engine honours (same names as the binding's)."""

from __future__ import annotations

from typing import Protocol


class OptionsHost(Protocol):
    """What the options set on their transaction (``transaction.Transaction`` is the one): named
    here so that this module does not import the transaction's, which imports it."""

    _timeout: float | None
    _retry_limit: int | None
    _max_retry_delay: float
    _no_write_conflict_next: bool
    _special_writes: bool


class TransactionOptions:
    """The per-transaction options the embedded engine honours (same names as the binding)."""

    def __init__(self, tr: OptionsHost) -> None:
        self._tr = tr

    def set_timeout(self, milliseconds: int) -> None:
        self._tr._timeout = milliseconds / 1000.0 if milliseconds else None

    def set_retry_limit(self, limit: int) -> None:
        self._tr._retry_limit = None if limit is None or limit < 0 else limit

    def set_max_retry_delay(self, milliseconds: int) -> None:
        self._tr._max_retry_delay = milliseconds / 1000.0

    def set_next_write_no_write_conflict_range(self) -> None:
        """The next write (set, clear, clear_range, atomic op) adds no write conflict range."""
        self._tr._no_write_conflict_next = True

    def set_special_key_space_enable_writes(self) -> None:
        """Allow clearing the special key space's tenant map (empty: the engine has no tenants)."""
        self._tr._special_writes = True
