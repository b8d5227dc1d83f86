"""The one interface through which the bench drives a queue store: ours or a reference.

A *target* owns a store (the app's database, a Redis server, a SQLite file) and makes
*clients*, one per bench client (thread or process), each with its own connection where the
store has connections. Workloads only ever call a client's ``push``, ``pop`` and ``peek``, so
the same workload runs unchanged against every target, and the figures compare like with like
(the app's own clients also claim and wait, for rows that only the app has).

A target started in the bench's process is described by a picklable :class:`TargetSpec`, from
which a client process (started with ``spawn``, so it shares nothing) opens its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Hashable, Protocol, Sequence, cast

__all__ = ["Client", "Target", "TargetSpec", "OURS", "open_target"]

#: The name under which the app's own rows appear; the references are "recipe", "redis" and "sqlite".
OURS = "fdbqueue"


class Client(Protocol):
    """One bench client's view of a queue; ``pop`` and ``peek`` return an item id, None when empty."""

    def push(self, value: Any, priority: int) -> None: ...

    def pop(self, end: str) -> Hashable | None: ...

    def peek(self, end: str) -> Hashable | None: ...

    def close(self) -> None: ...


class Target(Protocol):
    """A queue store under measurement. ``strategy`` is None for rows that do not depend on one."""

    name: str

    def spec(self) -> "TargetSpec": ...

    def prepare(self, queue: str, strategy: str | None) -> None: ...

    def fill(self, queue: str, strategy: str | None, batch: Sequence[tuple[Any, int]]) -> None: ...

    def remaining(self, queue: str, strategy: str | None) -> int: ...

    def drop(self, queue: str, strategy: str | None) -> None: ...

    def client(self, queue: str, strategy: str | None) -> Client: ...

    def retry_counts(self) -> dict[int, int] | None:
        """Retries so far in this process by error code; None for stores that do not retry."""

    def server_memory_mib(self) -> float | None:
        """Peak memory of a separate server process, when there is one."""

    def metadata(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TargetSpec:
    """How another process opens the same target: a kind and plain, picklable options.

    ``opener`` ("module:function", taking the options) is for targets outside the app: the
    project's references and FoundationDB's recipe (see ``references``); the app's own are found
    by their kind.
    """

    kind: str
    options: dict[str, Any] = field(default_factory=dict, hash=False)
    opener: str = ""


# kind -> "module:function" taking the spec's options; imported only in the process that needs it,
# so a child that measures Redis never imports Django's database layer, and vice versa.
_OPENERS = {OURS: "django_fdbqueue.bench.child:open_service"}


def open_target(spec: TargetSpec) -> Target:
    """Open the target that ``spec`` describes, in this process."""
    module_name, _, function = (spec.opener or _OPENERS[spec.kind]).partition(":")
    opener = getattr(import_module(module_name), function)
    return cast(Target, opener(**spec.options))
