"""Watches for the embedded engine: futures that become ready when a key's value changes.

As in FoundationDB, a watch belongs to the transaction that set it and starts once that
transaction commits, comparing the key against the value that transaction saw (its own write,
if it wrote the key). It fires when the stored value differs; a change that is undone before
anyone looks (A to B back to A) may go unnoticed, which FoundationDB allows too, so callers
re-read after a watch fires.

One daemon thread per database does the looking, and only while watches are waiting: it wakes
at once after commits made through this process's handle, checks the shared commit signal (see
``wakeup``) every `signal_interval` seconds to notice commits made by other processes within a
few milliseconds, and also compares the store's commit version every `poll_interval` seconds, in
case the signal file could not be made.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from django_fdbqueue.fdbapi import ErrorCode, make_error

from .futures import Future

if TYPE_CHECKING:
    from .storage import Storage
    from .wakeup import CommitSignal

# FoundationDB's default limit of outstanding watches per database.
MAX_WATCHES = 10_000


class WatchFuture(Future):
    """Ready (``wait()`` returns None) once the watched key changed; raises if it was cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[["WatchFuture"], None]] = []

    def _finish(self, error: BaseException | None = None) -> None:
        with self._lock:
            if self._done.is_set():
                return
            self._error = error
            self._done.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)

    def wait(self) -> None:
        """Block until the key changes (as the binding does: bound it with on_ready or cancel)."""
        self._done.wait()
        super().wait()  # raises the watch's error, if any

    def is_ready(self) -> bool:
        return self._done.is_set()

    def block_until_ready(self) -> None:
        self._done.wait()

    def on_ready(self, callback: Callable[["WatchFuture"], None]) -> None:
        """Call `callback(self)` once ready: at once if it already is, else from the watcher."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        callback(self)

    def cancel(self) -> None:
        self._finish(make_error(ErrorCode.OPERATION_CANCELLED))


class Watcher:
    """Watches of one database, checked by a background thread while any are waiting."""

    def __init__(
        self,
        storage: "Storage",
        *,
        poll_interval: float = 0.05,
        limit: int = MAX_WATCHES,
        signal: "CommitSignal | None" = None,
        signal_interval: float = 0.002,
    ) -> None:
        self._storage = storage
        self.poll_interval = poll_interval
        self._signal = signal if signal is not None and signal.available else None
        self.signal_interval = signal_interval
        self.limit = limit
        self._watches: list[tuple[bytes, bytes | None, WatchFuture]] = []
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        # Set when a watch arrives or this handle commits: look even if the version seems seen.
        self._dirty = False
        #: No thread: whoever drives the watches calls check_now() (a simulation, which decides
        #: when each watch hears of a change).
        self.manual = False

    def add(self, key: bytes, baseline: bytes | None, future: WatchFuture) -> None:
        """Start watching `key` for a value other than `baseline`."""
        with self._wake:
            if self._closed:
                future.cancel()
                return
            self._watches = [w for w in self._watches if not w[2].is_ready()]
            if len(self._watches) >= self.limit:
                future._finish(make_error(ErrorCode.TOO_MANY_WATCHES))
                return
            self._watches.append((key, baseline, future))
            self._dirty = True
            if self._thread is None and not self.manual:
                self._thread = threading.Thread(target=self._run, name="fdbqueue-embedded-watches", daemon=True)
                self._thread.start()
            self._wake.notify()

    def notify(self) -> None:
        """A commit went through this handle: look now rather than at the next poll.

        Watches that fired or were cancelled are dropped first, so a handle whose watches are
        all done does not wake the thread on every commit.
        """
        with self._wake:
            if self._watches:
                self._watches = [w for w in self._watches if not w[2].is_ready()]
            if self._watches:
                self._dirty = True
                self._wake.notify()

    def check_now(self) -> None:
        """Compare every waiting watch with the store once (the thread's work, on demand)."""
        with self._wake:
            watches = [w for w in self._watches if not w[2].is_ready()]
        if not watches:
            return
        conn = self._storage.acquire()
        try:
            changed = [future for key, baseline, future in watches if self._storage.get(conn, key) != baseline]
        finally:
            self._storage.release(conn)
        for future in changed:
            future._finish()

    def close(self) -> None:
        """Cancel every waiting watch and stop the thread."""
        with self._wake:
            self._closed = True
            watches, self._watches = self._watches, []
            thread, self._thread = self._thread, None
            self._wake.notify()
        for _key, _baseline, future in watches:
            future.cancel()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5.0)

    def _run(self) -> None:
        seen_version: int | None = None
        seen_signal = self._signal.read() if self._signal is not None else None
        next_poll = 0.0
        while True:
            with self._wake:
                while not self._closed and not any(not w[2].is_ready() for w in self._watches):
                    self._wake.wait()
                if self._closed:
                    return
                if not self._dirty:
                    self._wake.wait(self.signal_interval if self._signal is not None else self.poll_interval)
                if self._closed:
                    return
                dirty, self._dirty = self._dirty, False
            try:
                if self._signal is not None:
                    signal = self._signal.read()
                    if signal != seen_signal:
                        seen_signal, dirty = signal, True
                now = time.monotonic()
                if dirty or now >= next_poll:
                    next_poll = now + self.poll_interval
                    version = self._storage.current_version()
                    if dirty or version != seen_version:
                        seen_version = version
                        self.check_now()
            except Exception:  # a store that went away: the waiting watches cannot be served
                with self._wake:
                    watches, self._watches = self._watches, []
                for _key, _baseline, future in watches:
                    future.cancel()
