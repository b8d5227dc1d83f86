"""Result objects of the embedded engine, shaped like the official binding's futures.

The embedded engine answers reads synchronously, so every future here is born ready (or
computes itself on ``wait()``); what matters is that callers can use the binding's idioms:
``tr[key].present()``, ``tr[key] == b"..."``, ``tr.commit().wait()``, ``for k, v in range``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, cast


class Future:
    """A ready future: ``wait()`` returns the result or raises the stored error."""

    def __init__(self, result: Any = None, error: BaseException | None = None) -> None:
        self._result = result
        self._error = error

    def wait(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._result

    def is_ready(self) -> bool:
        return True

    def block_until_ready(self) -> None:
        return None

    def on_ready(self, callback: Callable[["Future"], None]) -> None:
        callback(self)


class DeferredFuture(Future):
    """A future whose work (a back-off, a check) runs when the caller waits on it, once."""

    def __init__(self, work: Callable[[], Any]) -> None:
        super().__init__()
        self._work: Callable[[], Any] | None = work

    def wait(self) -> Any:
        if self._work is not None:
            work, self._work = self._work, None
            try:
                self._result = work()
            except BaseException as error:  # kept so that every later wait() raises it too
                self._error = error
        return super().wait()


class _BytesFuture:
    """Behaves like the bytes it holds, as the binding's ``FutureString`` does.

    Like the binding, it reports ``bytes`` as its ``__class__`` and has no ``__bool__``: the
    truth of a missing value (``None``) raises ``TypeError`` through ``__len__``, so callers
    must test presence with ``present()`` or ``== None``.
    """

    __slots__ = ("value",)

    def __init__(self, value: bytes | None) -> None:
        self.value = value

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return bytes

    def wait(self) -> "_BytesFuture":
        return self

    def is_ready(self) -> bool:
        return True

    def block_until_ready(self) -> None:
        return None

    def as_foundationdb_key(self) -> bytes | None:
        return self.value

    def as_foundationdb_value(self) -> bytes | None:
        return self.value

    def __bytes__(self) -> bytes:
        return self.value  # type: ignore[return-value]

    def __str__(self) -> str:
        return str(self.value)

    def __repr__(self) -> str:
        return repr(self.value)

    def __len__(self) -> int:
        return len(self.value)  # type: ignore[arg-type]

    def __getitem__(self, index: Any) -> Any:
        return self.value[index]  # type: ignore[index]

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, _BytesFuture):
            other = other.value
        return cast(bool, self.value == other)

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __lt__(self, other: Any) -> bool:
        return cast(bool, self.value < _unwrap(other))

    def __le__(self, other: Any) -> bool:
        return cast(bool, self.value <= _unwrap(other))

    def __gt__(self, other: Any) -> bool:
        return cast(bool, self.value > _unwrap(other))

    def __ge__(self, other: Any) -> bool:
        return cast(bool, self.value >= _unwrap(other))

    def __add__(self, other: Any) -> bytes:
        return cast(bytes, self.value + _unwrap(other))

    def __radd__(self, other: Any) -> bytes:
        return cast(bytes, _unwrap(other) + self.value)

    def __int__(self) -> int:
        return int(self.value)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        # bytes methods (decode, startswith, ...) act on the held value, as in the binding.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.value, name)


def _unwrap(obj: Any) -> Any:
    return obj.value if isinstance(obj, _BytesFuture) else obj


class Value(_BytesFuture):
    """The result of ``tr[key]``: the value's bytes, or absent."""

    __slots__ = ()

    def present(self) -> bool:
        return self.value is not None


class Key(_BytesFuture):
    """The result of ``tr.get_key(selector)`` or ``tr.get_versionstamp()``."""

    __slots__ = ()


class KeyValue:
    """One row of a range read: ``.key`` and ``.value``, and unpacks as ``key, value``."""

    __slots__ = ("key", "value")

    def __init__(self, key: bytes, value: bytes) -> None:
        self.key = key
        self.value = value

    def __iter__(self) -> Iterator[bytes]:
        yield self.key
        yield self.value

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, KeyValue):
            return (self.key, self.value) == (other.key, other.value)
        if isinstance(other, tuple):
            return (self.key, self.value) == other
        return NotImplemented

    def __repr__(self) -> str:
        return "%r: %r" % (self.key, self.value)


class RangeResult:
    """The result of ``get_range``: iterable (lazily, in batches) and ``to_list()``.

    `first` is the read already under way when ``get_range`` returned (the binding sends it at
    once); the first iteration continues it. Each later iteration reads afresh, as iterating the
    binding's ``FDBRange`` twice does.
    """

    def __init__(self, iterate: Callable[[], Iterator[KeyValue]], first: Iterator[KeyValue] | None = None) -> None:
        self._iterate = iterate
        self._first = first

    def __iter__(self) -> Iterator[KeyValue]:
        if self._first is not None:
            first, self._first = self._first, None
            return first
        return self._iterate()

    def to_list(self) -> list[KeyValue]:
        return list(self)
