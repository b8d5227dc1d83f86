#!/usr/bin/env python3
"""Where one client's push+pop loop spends its time on the embedded engine: a sampling profile.

    .venv/bin/python scripts/profile-push-pop.py                  # 20,000 pairs, summary on stdout
    .venv/bin/python scripts/profile-push-pop.py --out FILE.txt   # and the summary in FILE.txt

The loop is the bench's "push then pop" row (``service.push`` then ``service.pop``, one client,
one queue, a fresh store in a temporary folder). It runs once on its own for the rate, then again
under py-spy (``pip install py-spy``), a sampling profiler: unlike cProfile it does not slow down
each Python call, so Python and SQLite keep their real proportions.

Time is shown "self" (where the sample was taken), per function and per layer. py-spy sees
Python frames only, so time inside SQLite's C code counts as the self time of the storage
function that called it: the "SQLite" layer is every function of ``engines/embedded/storage.py``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUE = "profile"
LOOP = "push_pop_loop"
# (layer, pattern of a frame's file): the first that matches names the layer.
LAYERS = [
    ("SQLite (statements, commit, checkpoint)", r"engines/embedded/storage\.py"),
    ("engine, Python (transaction, write cache, reads)", r"engines/embedded/"),
    ("tuple layer (key packing)", r"fdb/(tuple|subspace_impl)\.py"),
    ("service (catalog, items, counters)", r"django_fdbqueue/service/"),
    ("retry loop and codecs", r"django_fdbqueue/(fdbapi|codecs)\.py"),
    ("json", r"/json/"),
]


def _setup(store: str) -> None:
    import django
    from django.conf import settings

    settings.configure(
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_fdbqueue"],
        FDBQUEUE={"ENGINE": "embedded", "PATH": store},
        USE_TZ=True,
    )
    django.setup()


def push_pop_loop(db: object, pairs: int) -> None:
    from django_fdbqueue import service

    for n in range(pairs):
        service.push(db, QUEUE, {"n": n}, priority=n % 10)
        service.pop(db, QUEUE, "min")


def child(store: str, pairs: int) -> None:
    """Run the loop (the process py-spy samples); print the rate of an unprofiled first pass."""
    _setup(store)
    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database

    db = get_database()
    service.create_queue(db, QUEUE, "priority")
    push_pop_loop(db, min(pairs, 2000))  # warm up: catalog cached, pages in memory
    started = time.perf_counter()
    push_pop_loop(db, pairs)
    print(f"{pairs / (time.perf_counter() - started):,.0f}", flush=True)


def _frames(raw_path: str) -> collections.Counter:
    """Self samples per (function, file), for the stacks inside the profiled loop only."""
    counts: collections.Counter = collections.Counter()
    with open(raw_path) as raw:
        for line in raw:
            stack, _, number = line.rstrip().rpartition(" ")
            frames = stack.split(";")
            if not any(f.startswith(LOOP + " ") for f in frames):
                continue
            match = re.match(r"(.*) \((.*?)(?::\d+)?\)$", frames[-1])
            name, path = match.groups() if match else (frames[-1], "")
            counts[(name, path)] += int(number)
    return counts


def _layer(path: str) -> str:
    for layer, pattern in LAYERS:
        if re.search(pattern, path):
            return layer
    return "other (Django, the standard library)"


def _short(path: str) -> str:
    for marker in ("django_fdbqueue/", "fdb/", "json/"):
        if marker in path:
            return marker + path.split(marker, 1)[1]
    return os.path.basename(path)


def summary(raw_path: str, rate: str, top: int) -> str:
    counts = _frames(raw_path)
    total = sum(counts.values()) or 1
    layers: collections.Counter = collections.Counter()
    for (_name, path), number in counts.items():
        layers[_layer(path)] += number
    lines = [f"push+pop pairs/s, unprofiled: {rate}", f"samples in the loop: {total:,}", "", "By layer (self time):"]
    lines += [f"  {100 * n / total:5.1f}%  {layer}" for layer, n in layers.most_common()]
    lines += ["", f"Top {top} functions (self time):"]
    lines += [f"  {100 * n / total:5.1f}%  {name} ({_short(path)})" for (name, path), n in counts.most_common(top)]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--rate", type=int, default=1000, help="samples per second")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--out", help="also write the summary to this file")
    parser.add_argument("--child", metavar="STORE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.pairs)
        return 0
    spy = shutil.which("py-spy") or shutil.which("py-spy", path=os.path.dirname(sys.executable))
    if spy is None:
        print("py-spy is not installed: pip install py-spy", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="fdbqueue-profile-") as folder:
        raw = os.path.join(folder, "profile.raw")

        def loop(*spying: str, store: str) -> subprocess.CompletedProcess:
            command = [
                sys.executable,
                os.path.abspath(__file__),
                "--child",
                os.path.join(folder, store),
                "--pairs",
                str(args.pairs),
            ]
            return subprocess.run([*spying, *command], capture_output=True, text=True, timeout=1800)

        plain = loop(store="plain.sqlite3")
        spied = loop(
            spy, "record", "--rate", str(args.rate), "--format", "raw", "--output", raw, "--", store="profiled.sqlite3"
        )
        if plain.returncode != 0 or spied.returncode != 0 or not os.path.exists(raw):
            print(plain.stdout + plain.stderr + spied.stdout + spied.stderr, file=sys.stderr)
            return 1
        text = summary(raw, plain.stdout.strip().splitlines()[-1], args.top)
    print(text, end="")
    if args.out:
        with open(args.out, "w") as out:
            out.write(text)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(HERE))
    sys.exit(main())
