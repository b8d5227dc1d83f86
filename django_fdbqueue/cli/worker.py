"""``manage.py fdbqueue worker QUEUE --handler path.to.callable``: consume a queue until told to stop.

The loop itself is :class:`django_fdbqueue.worker.Worker`; this module only turns options into
one, imports the handler, shows the worker's log when the project has not configured logging, and
maps SIGTERM/SIGINT (once: finish and exit; twice: release and exit) through
:func:`django_fdbqueue.worker.run_until_signalled`.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from django.db import close_old_connections
from django.utils.module_loading import import_string

from django_fdbqueue.worker import Worker, run_until_signalled
from django_fdbqueue.worker.runner import MAX_CONCURRENCY, logger

from .arguments import add_end, add_queue_name, positive_int, positive_seconds, seconds
from .base import Context, add_subcommand
from .errors import usage_error
from .output import emit, fields

__all__ = ["register", "handle_worker", "load_handler"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LEVELS = {0: logging.WARNING, 1: logging.INFO}


def register(subparsers: Any) -> None:
    """Add ``worker`` to ``manage.py fdbqueue``."""
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
            "second one releases the items in progress at once. The log goes to standard error."
        ),
    )
    add_queue_name(parser)
    parser.add_argument(
        "--handler",
        dest="handler_path",  # "handler" is the subcommand's own function in the options
        required=True,
        metavar="DOTTED.PATH",
        help="The callable to call with each item, e.g. myapp.tasks.send_email (importable, like a setting).",
    )
    parser.add_argument(
        "--concurrency",
        metavar="N",
        type=positive_int,
        default=1,
        help=f"Threads, so items handled at once (1 to {MAX_CONCURRENCY}). Default: 1.",
    )
    parser.add_argument(
        "--lease",
        metavar="S",
        type=positive_seconds,
        default=30.0,
        help="Lease length in seconds; renewed every third of it while a handler runs. Default: 30.",
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
    return handler


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


def handle_worker(ctx: Context, options: dict[str, Any]) -> None:
    """Run a worker until SIGTERM/SIGINT, then print what it did (exit 0)."""
    name = options["name"]
    handler = load_handler(options["handler_path"])
    worker = Worker(
        ctx.database(),
        name,
        _with_fresh_connections(handler),
        concurrency=options["concurrency"],
        lease=options["lease"],
        end=options["end"],
        max_backoff=options["max_backoff"],
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
