"""``manage.py fdbqueue scheduler``: fire periodic schedules until told to stop, or once with ``--once``.

The loop is :class:`django_fdbqueue.schedules.Scheduler`: it syncs the schedules declared in
code (``@periodic``, ``schedules.declare``, found by importing each installed app's
``schedules`` module; a refused declaration is exit code 2) into the store, fires what is due,
waits until the next due time (at most ``--max-wait`` seconds, so schedules created elsewhere
are seen), again.
SIGTERM or SIGINT ends it after the pass in progress. Any number may run: each occurrence fires
once. ``manage.py fdbqueue schedules`` lists the stored schedules.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django_fdbqueue import schedules
from django_fdbqueue.schedules.model import as_data, iso
from django_fdbqueue.schedules.scheduler import DEFAULT_MAX_WAIT

from .arguments import positive_seconds
from .base import Context, add_subcommand
from .output import compact_json, emit, table

__all__ = ["register", "handle_scheduler", "handle_schedules"]


def register(subparsers: Any) -> None:
    """Add ``scheduler`` and ``schedules`` to ``manage.py fdbqueue``."""
    parser = add_subcommand(
        subparsers,
        "scheduler",
        handle_scheduler,
        help="Fire periodic schedules (push an item or enqueue a task) exactly once each, until stopped.",
        description=(
            "Sync the schedules declared in code (in each installed app's schedules.py, imported for\n"
            "them) into the store, then fire every due schedule and wait for the next due time, until\n"
            "SIGTERM or Ctrl-C. Run as many as you like: each occurrence fires once. With --once,\n"
            "fire what is due now and exit 0 (for cron jobs and tests)."
        ),
    )
    parser.add_argument("--once", action="store_true", help="Fire what is due now, print what fired, and exit.")
    parser.add_argument(
        "--max-wait",
        metavar="S",
        type=positive_seconds,
        default=DEFAULT_MAX_WAIT,
        help=f"The longest wait between looks at the due schedules, in seconds. Default: {DEFAULT_MAX_WAIT:g}.",
    )
    parser.add_argument(
        "--no-sync",
        dest="sync",
        action="store_false",
        help="Do not write the schedules declared in code to the store first.",
    )
    add_subcommand(subparsers, "schedules", handle_schedules, help="List the periodic schedules.")


def _fired_text(fired: list[schedules.Fired]) -> str:
    if not fired:
        return "Nothing was due."
    rows = [
        (
            f.name,
            len(f.occurrences),
            f.result.get("status"),
            f.result.get("item") or f.result.get("task_result") or f.result.get("detail"),
        )
        for f in fired
    ]
    return table(("SCHEDULE", "FIRED", "RESULT", "DETAIL"), rows, right={1})


def _fired_data(fired: list[schedules.Fired]) -> list[dict[str, Any]]:
    return [
        {
            "name": f.name,
            "occurrences": [iso(o) for o in f.occurrences],
            "result": {k: v for k, v in f.result.items() if k != "at_us"},
        }
        for f in fired
    ]


def handle_scheduler(ctx: Context, options: dict[str, Any]) -> None:
    """Run the scheduler until a signal (or once), then print what it fired."""
    db = ctx.database()
    if options["once"]:
        fired = schedules.run_once(db, sync=options["sync"])
    else:
        fired = _run_until_signalled(schedules.Scheduler(db, max_wait=options["max_wait"], sync=options["sync"]))
    emit(ctx, _fired_data(fired), lambda: _fired_text(fired))


def _run_until_signalled(scheduler: schedules.Scheduler) -> list[schedules.Fired]:
    """Run in the main thread; SIGTERM/SIGINT set the stop event (the pass in progress ends first)."""
    if threading.current_thread() is not threading.main_thread():
        return scheduler.run()
    wanted = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.signal(signum, lambda *_: scheduler.stop.set()) for signum in wanted}
    try:
        return scheduler.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def handle_schedules(ctx: Context, options: dict[str, Any]) -> None:
    found = schedules.list_schedules(ctx.database())
    rows = [
        (
            s.name,
            s.cron or f"every {s.interval:g}s",
            s.tz,
            "paused" if s.paused else as_data(s)["next_run"],
            as_data(s)["last_run"] or "-",
            compact_json((s.last_result or {}).get("status")),
        )
        for s in found
    ]
    emit(
        ctx,
        [as_data(s) for s in found],
        lambda: (
            table(("NAME", "TRIGGER", "TZ", "NEXT RUN", "LAST RUN", "LAST RESULT"), rows) if rows else "No schedules."
        ),
    )
