"""Value codecs: how a pushed Python value becomes the bytes stored in FoundationDB, and back.

Each stored item records the *name* of the codec that encoded it, so a queue may hold values of
different codecs and a value always decodes with the codec that wrote it, even after the default
changes. Built in:

* ``"json"`` (:class:`JSONCodec`, the default): JSON-serializable values, UTF-8, compact. JSON has
  no tuples, so a pushed tuple comes back as a list.
* ``"bytes"`` (:class:`BytesCodec`): raw ``bytes`` stored as they are. Chosen automatically when
  the pushed value is ``bytes``/``bytearray``/``memoryview``; comes back as ``bytes``.

A project adds its own codec by subclassing :class:`Codec` and calling :func:`register`, then
passes ``codec="its-name"`` (or the instance) to ``service.push``. Names are stored with every
item, so keep them short and never reuse one for a different format.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from .exceptions import InvalidArgument, InvalidValue


class Codec:
    """Turns values into bytes and back. Subclasses set a short, stable ``name``."""

    name: str = ""

    def encode(self, value: Any) -> bytes:  # pragma: no cover - interface
        raise NotImplementedError

    def decode(self, data: bytes) -> Any:  # pragma: no cover - interface
        raise NotImplementedError


# Deep enough for any sensible payload, shallow enough to decode inside any request's stack.
MAX_JSON_DEPTH = 256


def _nesting_depth(value: Any) -> int:
    """How deeply lists and dicts nest in `value` (iteratively: no recursion to exhaust)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: Any = current.values()
        elif isinstance(current, (list, tuple)):
            children = current
        else:
            continue
        deepest = max(deepest, depth)
        if depth > MAX_JSON_DEPTH:
            return depth
        stack.extend((child, depth + 1) for child in children)
    return deepest


class JSONCodec(Codec):
    """Compact UTF-8 JSON; rejects NaN/Infinity so every stored value is valid JSON for any reader."""

    name = "json"

    def encode(self, value: Any) -> bytes:
        # A stored value must read back wherever it is popped: json's decoder recurses once per
        # level, so a value nested near the interpreter's limit would block its end of the queue.
        if _nesting_depth(value) > MAX_JSON_DEPTH:
            raise InvalidValue(f"The value is nested more than {MAX_JSON_DEPTH} levels deep.", codec=self.name)
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
            encoded = text.encode("utf-8")
        except RecursionError:
            raise InvalidValue("The value is nested too deeply to store as JSON.", codec=self.name) from None
        except UnicodeEncodeError:
            raise InvalidValue(
                "The value contains text that is not valid Unicode (a lone surrogate).",
                codec=self.name,
            ) from None
        except (TypeError, ValueError) as exc:
            raise InvalidValue(
                f"The value is not JSON-serializable ({exc}); pass bytes, or a codec that can encode it.",
                codec=self.name,
            ) from None
        return encoded

    def decode(self, data: bytes) -> Any:
        return json.loads(data.decode("utf-8"))


class BytesCodec(Codec):
    """Raw bytes, unchanged: for payloads the application encodes itself."""

    name = "bytes"

    def encode(self, value: Any) -> bytes:
        if isinstance(value, (bytes, bytearray, memoryview)):
            return bytes(value)
        raise InvalidValue("The bytes codec stores only bytes-like values.", codec=self.name)

    def decode(self, data: bytes) -> Any:
        return bytes(data)


_registry: dict[str, Codec] = {}
_lock = threading.Lock()
_BYTES_LIKE = (bytes, bytearray, memoryview)


def register(codec: Codec) -> Codec:
    """Make ``codec`` available by name (for pushing with ``codec="name"`` and for decoding)."""
    name = getattr(codec, "name", None)
    if not isinstance(name, str) or not name or len(name) > 32:
        raise InvalidArgument("A codec needs a name of 1 to 32 characters.")
    with _lock:
        existing = _registry.get(name)
        if existing is not None and type(existing) is not type(codec):
            raise InvalidArgument(f"Another codec is already registered as {name!r}.")
        _registry[name] = codec
    return codec


def unregister(name: str) -> None:
    """Forget the codec called ``name`` (items it encoded can no longer be decoded here)."""
    with _lock:
        if name not in _registry or name in (JSON.name, BYTES.name):
            raise InvalidArgument(f"No removable codec is registered as {name!r}.")
        del _registry[name]


def registered() -> dict[str, Codec]:
    """A copy of the registry: name -> codec."""
    with _lock:
        return dict(_registry)


def get(name: str) -> Codec:
    """The registered codec called ``name`` (used to decode stored items)."""
    try:
        return _registry[name]
    except KeyError:
        raise InvalidArgument(
            f"No codec named {name!r} is registered in this process; register it with "
            "django_fdbqueue.codecs.register() before reading its items."
        ) from None


def choose(value: Any, codec: Codec | str | None = None) -> Codec:
    """The codec for pushing ``value``: the one asked for, else bytes for bytes-like, else JSON."""
    if codec is None:
        return BYTES if isinstance(value, _BYTES_LIKE) else JSON
    if isinstance(codec, str):
        return get(codec)
    if isinstance(codec, Codec):
        if _registry.get(codec.name) is not codec:
            register(codec)
        return codec
    raise InvalidArgument("codec must be a Codec instance, a registered codec name, or None.")


JSON = register(JSONCodec())
BYTES = register(BytesCodec())

__all__ = [
    "Codec",
    "JSONCodec",
    "BytesCodec",
    "register",
    "unregister",
    "registered",
    "get",
    "choose",
    "JSON",
    "BYTES",
]
