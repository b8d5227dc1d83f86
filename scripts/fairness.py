"""Fair shares between tenants: does a small tenant get through behind a big one?

    .venv/bin/python scripts/fairness.py                          # embedded, A 100,000, B 100
    .venv/bin/python scripts/fairness.py --engine foundationdb --cluster-file fdb.cluster --a 20000

One run, on a fresh store (embedded: a temporary file; a cluster: a fresh ROOT, cleared after):

1. creates a queue split by tenant and pushes tenant A's items (``--a``, in ``push_many`` batches);
2. starts ``--consumers`` threads that claim and ack (``--mode claim``, the default) or pop;
3. once the consumers have taken ``--head-start`` of A's items (B arrives "a little later"),
   pushes tenant B's items (``--b``);
4. stops when B's last item is done, and prints how many of A's items were consumed between B's
   push and B's last item (the share A took while B waited), with the same figure for a plain
   queue in FIFO order for comparison: there B waits behind all of A's backlog.

Exit code 0; the figure is the output. docs/howto/tenants.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def configure(args: argparse.Namespace, directory: str) -> None:
    import django
    from django.conf import settings

    fdbqueue = {"ENGINE": args.engine, "ROOT": ("fdbqueue-fairness", uuid.uuid4().hex), "TIMEOUT": 60}
    if args.engine == "embedded":
        fdbqueue["PATH"] = os.path.join(directory, "fairness.sqlite3")
    else:
        fdbqueue["CLUSTER_FILE"] = args.cluster_file
        if args.client_library:
            fdbqueue["CLIENT_LIBRARY"] = args.client_library
    settings.configure(INSTALLED_APPS=[], FDBQUEUE=fdbqueue, USE_TZ=True)
    django.setup()


class Tally:
    """What the consumers took, by tenant, and when B's last item was done."""

    def __init__(self, b_total: int) -> None:
        self.lock = threading.Lock()
        self.a = self.b = 0
        self.a_at_b_push: int | None = None
        self.a_at_b_done: int | None = None
        self.b_total = b_total
        self.done = threading.Event()

    def took(self, tenant: str) -> None:
        with self.lock:
            if tenant == "A":
                self.a += 1
            else:
                self.b += 1
                if self.b == self.b_total:
                    self.a_at_b_done = self.a
                    self.done.set()


def consume(db, name: str, mode: str, tally: Tally, stop: threading.Event) -> None:
    from django_fdbqueue import service

    while not stop.is_set() and not tally.done.is_set():
        if mode == "claim":
            lease = service.claim(db, name, lease=300)
            if lease is None:
                continue
            service.ack(db, lease.receipt)
            tally.took(lease.item.value[0])
        else:
            item = service.pop(db, name)
            if item is not None:
                tally.took(item.value[0])


def run(db, name: str, args: argparse.Namespace, *, tenants: bool) -> Tally:
    """One measurement on queue ``name`` (split by tenant, or plain for comparison)."""
    from django_fdbqueue import service

    service.create_queue(db, name, tenants=tenants)
    a_opts = {"tenant": "A"} if tenants else {}
    b_opts = {"tenant": "B"} if tenants else {}
    service.push_many(db, name, [["A", i] for i in range(args.a)], **a_opts)
    tally, stop = Tally(args.b), threading.Event()
    threads = [
        threading.Thread(target=consume, args=(db, name, args.mode, tally, stop), daemon=True)
        for _ in range(args.consumers)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + args.timeout
    while tally.a < args.head_start and time.monotonic() < deadline:
        time.sleep(0.01)
    with tally.lock:
        tally.a_at_b_push = tally.a
    service.push_many(db, name, [["B", i] for i in range(args.b)], **b_opts)
    finished = tally.done.wait(max(0.0, deadline - time.monotonic()))
    stop.set()
    for t in threads:
        t.join(timeout=60)
    service.delete_queue(db, name)
    if not finished:
        tally.a_at_b_done = None
    return tally


def report(label: str, tally: Tally, args: argparse.Namespace) -> None:
    if tally.a_at_b_done is None:
        print(f"{label}: B not done within {args.timeout:g} s (A consumed {tally.a:,} of {args.a:,})")
        return
    share = tally.a_at_b_done - (tally.a_at_b_push or 0)
    print(
        f"{label}: B's {args.b:,} items done after {share:,} of A's items "
        f"({share / args.b:.2f} per B item; A consumed {tally.a_at_b_done:,} of {args.a:,} in all)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("embedded", "foundationdb"), default="embedded")
    parser.add_argument("--cluster-file", default=None)
    parser.add_argument("--client-library", default=os.environ.get("FDBQUEUE_CLIENT_LIBRARY"))
    parser.add_argument("--a", type=int, default=100_000, help="tenant A's items (default 100,000)")
    parser.add_argument("--b", type=int, default=100, help="tenant B's items (default 100)")
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--mode", choices=("claim", "pop"), default="claim")
    parser.add_argument("--head-start", type=int, default=200, help="A's items consumed before B pushes")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--no-plain", action="store_true", help="skip the plain-queue comparison")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        configure(args, directory)
        from django_fdbqueue.connection import get_database

        db = get_database()
        print(
            f"engine {args.engine}, A {args.a:,} items, B {args.b:,} items pushed after A's "
            f"first {args.head_start:,} were consumed, {args.consumers} consumers, {args.mode}"
        )
        report("split by tenant", run(db, "fair", args, tenants=True), args)
        if not args.no_plain:
            report("plain FIFO     ", run(db, "plain", args, tenants=False), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
