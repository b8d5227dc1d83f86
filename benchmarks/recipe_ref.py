"""FoundationDB's own priority-queue recipe as a bench target, on the same store as the service.

The recipe's code comes from the file the user names (``--recipe PATH``, read by
:mod:`benchmarks.recipe_source`) and runs as it is, on the very database handle the
service uses: the same cluster (or embedded file), the same client, the same transaction timeout
and retry limit, in the same run. Two things are supplied from outside, as a deployment of the
recipe would supply them:

* **the handle**: every recipe function is called with the app's database. On the
  ``foundationdb`` engine the recipe's ``fdb`` is the official binding itself, so its
  ``@fdb.transactional`` is the binding's own retry loop. The embedded engine has no binding
  underneath, so there the recipe's ``fdb`` is the binding's package with ``transactional``
  taken from :mod:`django_fdbqueue.fdbapi`, which behaves the same on both engines.
* **where its keys go**: the recipe keeps a queue in one module-level subspace (``('P',)``, at
  the very top of the key space, where a user's own data could be). The bench moves that
  subspace, with its own tuple prefix intact, under ``ROOT/"bench-recipe"/queue``: each bench
  queue gets its own recipe queue, nothing outside the app's ROOT is touched, and the bench
  can clear it afterwards.

Values are the same JSON bytes the service stores; the recipe returns a popped value and the
bench's exactly-once check identifies the item by the number inside it. The recipe keeps no
count, so :meth:`RecipeTarget.remaining` counts keys, a few thousand per transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence, cast

from django_fdbqueue.bench.child import database
from django_fdbqueue.bench.references import RecipeUnavailable
from django_fdbqueue.bench.targets import TargetSpec
from django_fdbqueue.fdbapi import Subspace, fdb, transactional

from .recipe_source import RecipeSource

__all__ = ["NAME", "SPACE", "RecipeTarget", "RecipeClient", "RecipeFunctions", "bind", "open_recipe"]

#: The name of the recipe's rows (the target column) and the settings line.
NAME = "recipe"
#: Where under the app's ROOT the recipe's queues live.
SPACE = "bench-recipe"
#: Keys counted per transaction by ``remaining`` (well inside FoundationDB's five seconds).
_COUNT_CHUNK = 10_000
#: Recipe pushes per transaction when filling: each reads the last count of its priority first,
#: so a transaction of the service's 5,000 items could outlive FoundationDB's five seconds.
FILL_PER_TRANSACTION = 500


class _EngineFDB:
    """The ``fdb`` the recipe sees on the embedded engine: the binding's package, with the
    app's ``transactional`` (the binding's own needs the C library and its transaction class)."""

    transactional = staticmethod(transactional)
    Subspace = Subspace

    def __getattr__(self, name: str) -> Any:
        return getattr(fdb, name)


def _recipe_fdb(db: Any) -> Any:
    """The official binding when ``db`` is one of its databases, else the engine-neutral twin."""
    if type(db).__module__.startswith("fdb."):
        return fdb
    return _EngineFDB()


@dataclass(frozen=True)
class RecipeFunctions:
    """The recipe's functions, bound to one queue's place in the key space."""

    push: Callable[..., Any]
    pop: Callable[..., Any]
    peek: Callable[..., Any]
    space: Subspace


def bind(code: str, db: Any, base: Subspace) -> RecipeFunctions:
    """Run the recipe's code in a fresh namespace and move its subspace(s) under ``base``."""
    namespace: dict[str, Any] = {"__name__": "fdbqueue_bench_recipe", "fdb": _recipe_fdb(db)}
    exec(compile(code, "<fdbqueue bench recipe>", "exec"), namespace)  # noqa: S102 - the user's recipe file
    spaces = [name for name, value in namespace.items() if isinstance(value, Subspace)]
    if not spaces:
        raise ValueError("it defines no module-level fdb.Subspace to keep its queue in")
    for name in spaces:
        namespace[name] = Subspace(rawPrefix=base.key() + namespace[name].key())
    return RecipeFunctions(namespace["push"], namespace["pop"], namespace["peek"], base)


def _encode(value: Any) -> bytes:
    """The bytes the service's JSON codec stores for the same value."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _identity(raw: Any) -> Hashable | None:
    """A popped or peeked value's item number (the bench numbers every value it pushes)."""
    if raw is None:
        return None
    return cast(Hashable, json.loads(bytes(raw).decode("utf-8"))["n"])


class RecipeClient:
    """One bench client calling the recipe's functions with the shared database handle."""

    def __init__(self, db: Any, functions: RecipeFunctions) -> None:
        self._db = db
        self._functions = functions

    def push(self, value: Any, priority: int) -> None:
        self._functions.push(self._db, _encode(value), priority)

    def pop(self, end: str) -> Hashable | None:
        return _identity(self._functions.pop(self._db, end == "max"))

    def peek(self, end: str) -> Hashable | None:
        return _identity(self._functions.peek(self._db, end == "max"))

    def close(self) -> None:
        """Nothing to close: the handle is the app's."""


@transactional
def _push_all(tr: Any, push: Callable[..., Any], rows: list[tuple[bytes, int]]) -> None:
    for value, priority in rows:
        push(tr, value, priority)


@transactional
def _count_from(tr: Any, begin: bytes, end: bytes) -> tuple[int, bytes | None]:
    """Keys in [begin, end) up to the chunk size, and where to go on (None: done)."""
    count = 0
    last = None
    for kv in tr.snapshot.get_range(begin, end, limit=_COUNT_CHUNK):
        count += 1
        last = bytes(kv.key)
    if count < _COUNT_CHUNK or last is None:
        return count, None
    return count, last + b"\x00"


@transactional
def _clear(tr: Any, begin: bytes, end: bytes) -> None:
    tr.clear_range(begin, end)


class RecipeTarget:
    """The recipe on the app's store; the strategy is ignored (the recipe has one pop)."""

    name = NAME

    def __init__(self, db: Any, recipe: RecipeSource, settings_module: str | None, fdbqueue: dict[str, Any]) -> None:
        self._db = db
        self._recipe = recipe
        self._settings_module = settings_module
        self._fdbqueue = fdbqueue
        self._bound: dict[str, RecipeFunctions] = {}

    @classmethod
    def beside(cls, ours: Any, recipe: RecipeSource) -> "RecipeTarget":
        """The recipe on the store of ``ours`` (a ServiceTarget): its handle, and how children open it.

        The code is run once here, so a recipe that fails to load stops the bench before any row.
        """
        target = cls(ours.db, recipe, ours.settings_module, ours.fdbqueue)
        try:
            bind(recipe.code, ours.db, target._space("check"))
        except Exception as error:  # noqa: BLE001 - any failure of the user's code, said plainly
            raise RecipeUnavailable(
                f"--recipe {recipe.path}: its code failed to load: {type(error).__name__}: {error}"
            ) from error
        return target

    def _space(self, queue: str) -> Subspace:
        from django_fdbqueue.connection import root_subspace

        return root_subspace()[SPACE][queue]

    def functions(self, queue: str) -> RecipeFunctions:
        bound = self._bound.get(queue)
        if bound is None:
            bound = self._bound[queue] = bind(self._recipe.code, self._db, self._space(queue))
        return bound

    def spec(self) -> TargetSpec:
        if not self._settings_module:
            raise RuntimeError(
                "Client processes need the Django settings module (DJANGO_SETTINGS_MODULE) to "
                "configure themselves; run the bench through manage.py, or without processes."
            )
        options = {"recipe": self._recipe, "settings_module": self._settings_module, "fdbqueue": self._fdbqueue}
        return TargetSpec(NAME, options, opener=f"{__name__}:open_recipe")

    def prepare(self, queue: str, strategy: str | None) -> None:
        self.drop(queue, strategy)  # a queue of the recipe is its keys: start with none

    def fill(self, queue: str, strategy: str | None, batch: Sequence[tuple[Any, int]]) -> None:
        push = self.functions(queue).push
        rows = [(_encode(value), priority) for value, priority in batch]
        for start in range(0, len(rows), FILL_PER_TRANSACTION):
            _push_all(self._db, push, rows[start : start + FILL_PER_TRANSACTION])

    def remaining(self, queue: str, strategy: str | None) -> int:
        r = self._space(queue).range()
        total, begin = 0, r.start
        while begin is not None:
            count, begin = _count_from(self._db, begin, r.stop)
            total += count
        return total

    def drop(self, queue: str, strategy: str | None) -> None:
        r = self._space(queue).range()
        _clear(self._db, r.start, r.stop)
        self._bound.pop(queue, None)

    def client(self, queue: str, strategy: str | None) -> RecipeClient:
        return RecipeClient(self._db, self.functions(queue))

    def retry_counts(self) -> dict[int, int] | None:
        return None  # the recipe's retry loop is its own (the binding's): it counts nothing

    def server_memory_mib(self) -> float | None:
        return None

    def metadata(self) -> dict[str, Any]:
        from django_fdbqueue.connection import root_subspace

        return {
            "source": self._recipe.path,
            "sha256": self._recipe.sha256,
            "functions": list(self._recipe.functions),
            "transactional": "the binding's" if _recipe_fdb(self._db) is fdb else "django_fdbqueue.fdbapi's",
            "placement": f"its subspace under {root_subspace()[SPACE].key()!r} + queue name",
            "fill_per_transaction": FILL_PER_TRANSACTION,
        }

    def close(self) -> None:
        """The handle is the app's."""


def open_recipe(recipe: RecipeSource, settings_module: str, fdbqueue: dict[str, Any]) -> RecipeTarget:
    """FoundationDB's recipe on the parent's store (the same handle), as a client process's target."""
    return RecipeTarget(database(settings_module, fdbqueue), recipe, settings_module, fdbqueue)
