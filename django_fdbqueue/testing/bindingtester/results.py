"""What a run of the binding tester left in its database, and the comparison of two runs.

The driver names, for each test, the subspaces whose contents its testers must agree on (its
"result specifications": for ``api`` the workspace the test wrote and the logged stacks; for
``directory`` the stacks and the directory and subspace logs; none for ``directory_hca``, which
validates itself). After a run, ``dump`` (run in that run's environment, so on its engine) reads
those subspaces into a JSON file; :func:`compare` then matches two such files entry by entry.

Like the driver, an entry holding error 1007, 1009 or 1021 (too old, future version, commit
unknown: timing, not semantics) makes a difference permissible, and such differences are counted
apart. With concurrent testers the values depend on how the threads interleave, so only which
stack entries were logged is compared (the driver itself compares nothing then).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import EMBEDDED, ENGINE_ENV

OUTPUT_SUBSPACE = "tester_output"
BATCH = 1000


@dataclass
class Spec:
    """One result subspace: its entries, and how the driver compares them."""

    name: str
    key_start_index: int
    ordering_index: int | None
    error_pattern: bytes | None
    entries: list[tuple[bytes, bytes]] = field(default_factory=list)

    def permissible(self, value: bytes | None) -> bool:
        """Does ``value`` hold an error the driver disregards (1007, 1009, 1021)?"""
        return bool(self.error_pattern and value is not None and re.search(self.error_pattern, value))

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "key_start_index": self.key_start_index,
            "ordering_index": self.ordering_index,
            "error_pattern": self.error_pattern.hex() if self.error_pattern else None,
            "entries": [[key.hex(), value.hex()] for key, value in self.entries],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Spec":
        pattern = data.get("error_pattern")
        return cls(
            name=data["name"],
            key_start_index=data["key_start_index"],
            ordering_index=data["ordering_index"],
            error_pattern=bytes.fromhex(pattern) if pattern else None,
            entries=[(bytes.fromhex(k), bytes.fromhex(v)) for k, v in data["entries"]],
        )


def load(path: Path) -> list[Spec]:
    return [Spec.from_json(item) for item in json.loads(path.read_text(encoding="utf-8"))]


# -- comparing ---------------------------------------------------------------------------------


@dataclass
class Difference:
    """One entry the two runs disagree on (None: that run has no such entry)."""

    spec: str
    key: bytes
    left: bytes | None
    right: bytes | None
    permissible: bool

    def describe(self, names: tuple[str, str]) -> str:
        return "\n".join(
            [f"  {self.spec} {_show_key(self.key)}"]
            + [f"    {name}: {_show_value(value)}" for name, value in zip(names, (self.left, self.right))]
        )


@dataclass
class Comparison:
    entries: int = 0
    differences: list[Difference] = field(default_factory=list)

    @property
    def real_differences(self) -> list[Difference]:
        return [d for d in self.differences if not d.permissible]


def compare(left: list[Spec], right: list[Spec], *, values: bool = True) -> Comparison:
    """Match the runs' entries key by key in every result subspace; ``values=False`` compares
    only which keys each run wrote (for concurrent testers)."""
    result = Comparison()
    right_by_name = {spec.name: spec for spec in right}
    for spec in left:
        other = right_by_name.get(spec.name, Spec(spec.name, 0, None, None))
        if not values and spec.ordering_index is None:
            continue  # concurrent testers: a workspace's or log's contents depend on the interleaving
        mine, theirs = dict(spec.entries), dict(other.entries)
        for key in sorted(set(mine) | set(theirs)):
            result.entries += 1
            a, b = mine.get(key), theirs.get(key)
            if a is None or b is None or (values and a != b):
                result.differences.append(Difference(spec.name, key, a, b, spec.permissible(a) or spec.permissible(b)))
    return result


def _unpacked(data: bytes) -> Any:
    from django_fdbqueue.fdbapi import fdb

    try:
        return fdb.tuple.unpack(data)
    except Exception:  # not a tuple: shown as bytes
        return data


def _show_key(key: bytes) -> str:
    return repr(_unpacked(key))


def _show_value(value: bytes | None, width: int = 300) -> str:
    if value is None:
        return "(no entry)"
    text = repr(_unpacked(value))
    return text if len(text) <= width else text[:width] + "..."


# -- reading a run's results (in the run's own environment) ---------------------------------------


def _driver_tests(root: Path) -> Any:
    """The driver's ``bindingtester.tests`` package, imported from the tester's folder."""
    bindings = root / "bindings"
    sys.path[:0] = [str(bindings), str(bindings / "bindingtester")]
    from bindingtester.tests import Test  # type: ignore[import-not-found]

    return Test


def _read_range(db: Any, subspace: Any) -> list[tuple[bytes, bytes]]:
    import fdb

    entries: list[tuple[bytes, bytes]] = []
    begin: Any = subspace.range().start
    while True:
        batch = db.get_range(begin, subspace.range().stop, BATCH)
        entries += [(bytes(kv.key), bytes(kv.value)) for kv in batch]
        if len(batch) < BATCH:
            return entries
        begin = fdb.KeySelector.first_greater_than(batch[-1].key)


def dump(root: Path, test_name: str, cluster_file: str, api_version: int, out: Path) -> None:
    """Write the result subspaces of ``test_name`` in that database to ``out`` (JSON)."""
    import fdb

    fdb.api_version(api_version)
    test = _driver_tests(root).create_test(test_name, fdb.Subspace((OUTPUT_SUBSPACE,)))
    if test is None:
        raise SystemExit(f"the binding tester has no test named {test_name!r}")
    db = fdb.open(cluster_file)
    specs = []
    for spec in test.get_result_specifications():
        pattern = spec.error_regex.pattern if spec.error_regex is not None else None
        name = repr(fdb.tuple.unpack(spec.subspace.key()))
        specs.append(Spec(name, spec.key_start_index, spec.ordering_index, pattern, _read_range(db, spec.subspace)))
    out.write_text(json.dumps([spec.to_json() for spec in specs]), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """``python -m django_fdbqueue.testing.bindingtester.results ROOT TEST CLUSTER_FILE API OUT``."""
    parser = argparse.ArgumentParser(description="Read a binding tester run's results into a JSON file.")
    for name in ("root", "test", "cluster_file", "api_version", "out"):
        parser.add_argument(name)
    args = parser.parse_args(argv)
    import os

    if os.environ.get(ENGINE_ENV) == EMBEDDED:
        from .shim import install

        install()
    dump(Path(args.root), args.test, args.cluster_file, int(args.api_version), Path(args.out))


if __name__ == "__main__":
    main()
