"""``manage.py fdbqueue worker QUEUE --handler path.to.callable``: consume a queue until told to stop.

With ``--burst`` it stops on its own once nothing is ready and nothing is in hand (for cron jobs
and tests), and prints the same summary.

``manage.py fdbqueue worker --tasks [--backend ALIAS] [--queue NAME ...]`` runs Django tasks
instead: one worker per task queue of a ``django_fdbqueue.tasks.FDBQueueBackend``, the handler
being :class:`django_fdbqueue.tasks.runner.TaskRunner`.

The loop itself is :class:`django_fdbqueue.worker.Worker`; this module only turns options into
one, imports the handler, shows the worker's log when the project has not configured logging, and
maps SIGTERM/SIGINT (once: finish and exit; twice: release and exit) through
:func:`django_fdbqueue.worker.run_until_signalled`.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, cast

from django.db import close_old_connections
from django.utils.module_loading import import_string

from django_fdbqueue.worker import Worker, run_until_signalled
from django_fdbqueue.worker.runner import DEFAULT_LEASE, MAX_CONCURRENCY, logger

from django_fdbqueue.exceptions import QueueError
from django_fdbqueue.service import MAX_SPREAD

from .arguments import add_end, positive_int, positive_seconds, seconds
from .base import Context, add_subcommand
from .errors import usage_error
from .output import emit, fields

__all__ = ["register", "handle_worker", "load_handler"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LEVELS = {0: logging.WARNING, 1: logging.INFO}


def register(subparsers: Any) -> None:
    """Add ``worker`` to ``manage.py fdbqueue``.

    Long: one flat argparse definition, an option after another, each with its help text.
    """
    parser = add_subcommand(
        subparsers,
        "worker",
        handle_worker,
        help="Consume a queue with a Python callable: claim, handle, ack or release with back-off.",
        description=(
            "Claim items from QUEUE on leases and call HANDLER(item) for each, in --concurrency threads.\n"
            "A handler that returns acknowledges the item; one that raises releases it, hidden for a\n"
            "back-off that doubles with each attempt (up to --max-backoff). Leases are extended while a\n"
            "handler runs. SIGTERM or Ctrl-C: stop claiming, finish the items in progress, exit 0; a\n"
            "second one releases the items in progress at once. With --burst it also exits 0 on its\n"
            "own once nothing is ready. The log goes to standard error, the summary to standard output."
        ),
    )
    parser.add_argument("name", nargs="?", metavar="QUEUE", help="The queue to consume (not with --tasks).")
    parser.add_argument(
        "--handler",
        dest="handler_path",  # "handler" is the subcommand's own function in the options
        metavar="DOTTED.PATH",
        help="The callable to call with each item, e.g. myapp.tasks.send_email (importable, like a setting).",
    )
    parser.add_argument(
        "--tasks",
        action="store_true",
        help="Run Django tasks (@task functions) enqueued through a FDBQueueBackend, instead of QUEUE.",
    )
    parser.add_argument(
        "--backend",
        default="default",
        metavar="ALIAS",
        help="With --tasks: the TASKS backend whose queues to work on. Default: default.",
    )
    parser.add_argument(
        "--queue",
        dest="task_queues",
        action="append",
        metavar="NAME",
        help="With --tasks: a task queue name (repeat for several). Default: all the backend's QUEUES.",
    )
    parser.add_argument(
        "--concurrency",
        metavar="N",
        type=positive_int,
        default=1,
        help=f"Threads, so items handled at once (1 to {MAX_CONCURRENCY}). With --tasks this is per "
        "task queue: each queue gets N threads, so up to N times the number of queues tasks run at "
        "once. Default: 1.",
    )
    parser.add_argument(
        "--lease",
        metavar="S",
        type=positive_seconds,
        default=None,
        help=f"Lease length in seconds. It is renewed every third of it while a handler runs, so it "
        "does not limit how long a handler may take: it is how long the items of a worker that died "
        f"stay hidden before another worker gets them. Default: {DEFAULT_LEASE:g} (with --tasks: the "
        f"backend's LEASE option, {DEFAULT_LEASE:g} unless set).",
    )
    parser.add_argument(
        "--burst",
        action="store_true",
        help="Process what is ready, then exit 0 with the summary: exit once no item is ready in any "
        "of the worker's queues and none is in hand. Items delayed into the future (a run_after, a "
        "retry's back-off) are not waited for. For cron jobs and tests.",
    )
    parser.add_argument(
        "--spread",
        metavar="K",
        type=positive_int,
        default=None,
        help=f"For many workers of one queue: each claim takes one of the first K ready items at random "
        f"(2 to {MAX_SPREAD}), so claims rarely collide, and items leave in roughly, not exactly, queue "
        "order. Default: exact order (with --tasks: the backend's CLAIM_SPREAD option).",
    )
    parser.add_argument(
        "--claim-mode",
        choices=("plain", "high-contention"),
        default=None,
        help="high-contention: for many workers of one queue that must keep exact order, claims that "
        "meet others are served in rounds (not with --spread, nor on queues with key limits or split by "
        "tenant). Default: plain (with --tasks: the backend's CLAIM_MODE option).",
    )
    parser.add_argument(
        "--max-backoff",
        metavar="S",
        type=seconds,
        default=300.0,
        help="The longest a failed item waits before its next attempt, in seconds. Default: 300.",
    )
    add_end(parser)


def load_handler(path: str) -> Callable[[Any], Any]:
    """Import the handler by its dotted path; a usage error (exit 2) that says why otherwise."""
    try:
        handler = import_string(path)
    except ImportError as error:
        raise usage_error(f"Cannot import the handler {path!r}: {error}") from None
    except Exception as error:  # noqa: BLE001 - the handler's module itself failed to import
        raise usage_error(f"Importing the handler {path!r} failed: {type(error).__name__}: {error}") from None
    if not callable(handler):
        raise usage_error(f"The handler {path!r} is a {type(handler).__name__}, not a callable.")
    return cast("Callable[[Any], Any]", handler)


def _with_fresh_connections(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    # A worker thread lives long: like Django does around each request, drop database
    # connections that broke or outlived CONN_MAX_AGE before and after each item.
    def call(item: Any) -> Any:
        close_old_connections()
        try:
            return handler(item)
        finally:
            close_old_connections()

    return call


class _ContextLogHandler(logging.Handler):
    """Log records to the command's standard error, unstyled (no error colour on every line)."""

    def __init__(self, ctx: Context) -> None:
        super().__init__()
        self.ctx = ctx

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.ctx.stderr.write(self.format(record), style_func=lambda text: text)
            self.ctx.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never raise into the worker
            self.handleError(record)


def _show_log(ctx: Context, verbosity: int) -> logging.Handler | None:
    """Send the worker's log to standard error, unless the project's LOGGING already handles it."""
    if logger.hasHandlers():
        return None
    handler = _ContextLogHandler(ctx)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logger.addHandler(handler)
    logger.setLevel(_LEVELS.get(verbosity, logging.DEBUG))
    return handler


def _task_workers(ctx: Context, options: dict[str, Any]) -> tuple[Any, str]:
    """The workers of ``--tasks``: one per task queue of the chosen backend."""
    if options["name"] is not None or options["handler_path"] is not None:
        raise usage_error("--tasks runs the backend's tasks: give no QUEUE and no --handler.")
    try:
        from django_fdbqueue.tasks.runner import TaskWorkers, backend_named
    except ImportError as error:
        raise usage_error(
            f'--tasks needs the Tasks framework (Django 6.0+, or the app\'s "tasks" extra: '
            f"pip install 'django-tasks>=0.12,<0.13'): {error}"
        ) from None
    try:
        backend = backend_named(options["backend"])
    except QueueError:
        raise
    except Exception as error:  # noqa: BLE001 - an unknown alias, a broken TASKS setting
        raise usage_error(f"Cannot use the tasks backend {options['backend']!r}: {error}") from None
    ctx.database()  # a store that cannot be opened is exit code 3 before any thread starts
    workers = TaskWorkers(
        backend,
        options["task_queues"],
        concurrency=options["concurrency"],
        lease=options["lease"],
        burst=options["burst"],
        spread=options["spread"],
        claim_mode=options["claim_mode"],
    )
    return workers, ",".join(worker.queue for worker in workers.workers)


def _count_for_prometheus() -> None:
    """In prometheus-client's multiprocess mode, a worker's operations count with the web processes'.

    Only then: a worker serves no metrics itself, so outside that mode counting would be wasted.
    """
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    from django_fdbqueue import metrics

    if metrics.available():
        metrics.install()


def handle_worker(ctx: Context, options: dict[str, Any]) -> None:
    """Run a worker until SIGTERM/SIGINT (or, with --burst, until nothing is ready), then print what it did (exit 0)."""
    _count_for_prometheus()
    if options["tasks"]:
        worker, name = _task_workers(ctx, options)
    else:
        if options["task_queues"]:
            raise usage_error("--queue goes with --tasks; for one queue, give it as QUEUE.")
        name = options["name"]
        if name is None or options["handler_path"] is None:
            raise usage_error("Give the QUEUE to consume and --handler, or --tasks.")
        handler = load_handler(options["handler_path"])
        worker = Worker(
            ctx.database(),
            name,
            _with_fresh_connections(handler),
            concurrency=options["concurrency"],
            lease=DEFAULT_LEASE if options["lease"] is None else options["lease"],
            end=options["end"],
            max_backoff=options["max_backoff"],
            burst=options["burst"],
            spread=options["spread"],
            claim_mode=options["claim_mode"] or "plain",
        )
    log_handler = _show_log(ctx, options.get("verbosity", 1))
    try:
        stats = run_until_signalled(worker)
        logger.info(
            "Worker on queue %r stopped: %d processed, %d failed (%d now dead letters), %d lost, %d released.",
            name,
            stats.processed,
            stats.failed,
            stats.dead,
            stats.lost,
            stats.released,
        )
    finally:
        if log_handler is not None:
            logger.removeHandler(log_handler)
            logger.setLevel(logging.NOTSET)
    summary = {"name": name, **stats.as_dict()}
    emit(
        ctx,
        summary,
        lambda: fields(
            [
                ("Queue", name),
                ("Processed", stats.processed),
                ("Failed", stats.failed),
                ("Dead", stats.dead),
                ("Lost", stats.lost),
                ("Released", stats.released),
                ("Store errors", stats.store_errors),
            ]
        ),
    )
