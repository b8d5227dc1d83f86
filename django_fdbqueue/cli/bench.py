"""``manage.py fdbqueue bench``: measure the queues here; from a clone of the repository, also
compare them with FoundationDB's own recipe (``--recipe PATH``), Redis and raw SQLite.

The measuring lives in :mod:`django_fdbqueue.bench`; this module turns the command line into a
:class:`~django_fdbqueue.bench.plan.BenchConfig`, refuses what cannot run before anything is
measured, shows progress on standard error, and writes the results: the table (or, with
``--json``, the full JSON document) on standard output, and optionally the same document to a
file (``--json-file``) and a chart (``--plot``).

What it measures and its exit codes are in the command's own description (``_DESCRIPTION``, which
the CLI reference shows: docs/reference/cli.md); how to read the figures, in
docs/explanation/performance.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from typing import Any, Iterator

from django.core.management.base import CommandError

from django_fdbqueue.bench.progress import Progress
from django_fdbqueue.bench.references import (
    PlotUnavailable,
    RecipeUnavailable,
    ReferenceUnavailable,
    check,
    check_plot_available,
    load_recipe,
    write_plot,
)
from django_fdbqueue.bench.report import format_report, to_document, write_json
from django_fdbqueue.bench.runner import BenchError
from django_fdbqueue.bench.strategies import available
from django_fdbqueue.bench.plan import (
    COMPARE_CHOICES,
    DEFAULT_CLIENTS,
    DEFAULT_DEEP_SIZE,
    DEFAULT_DURATION,
    DEFAULT_TASKS,
    QUICK_CLIENTS,
    QUICK_DEEP_SIZE,
    QUICK_DURATION,
    QUICK_TASKS,
    BenchConfig,
)
from django_fdbqueue.bench.results import BenchResult
from django_fdbqueue.bench.suite import Bench

from .arguments import positive_int, positive_seconds
from .base import Context, add_subcommand
from .errors import EXIT_STORE, usage_error
from .output import compact_json

__all__ = ["register", "handle_bench"]

EXIT_INTERRUPTED = 130

_DESCRIPTION = """\
Measure the queue service against the store FDBQUEUE points at (the embedded engine's file, or a
FoundationDB cluster): push, pop, push+pop and claim+ack pairs with one client; pops, and claim+ack
pairs in exact order, as spread claims and in high-contention mode, with several concurrent
clients, as threads and as processes, checked for exactly-once delivery, with the CPU each
operation cost; the latency of a blocking pop woken by another process's push; peek and pop on a
shallow and a deep queue.

With --recipe PATH, FoundationDB's own priority-queue recipe (PATH: its Python code, or the
documentation page that holds it; the bench runs that code as it is, on the same database handle,
keeping its keys under ROOT) runs the same workloads on the same store in the same run. With
--compare, they also run on a private redis-server (sorted sets) and on a raw SQLite table on the
same disk. Every row of ours shows its rate divided by each reference's, and a goals table judges
the figures the project has goals for on the engine measured: on a cluster against the recipe, on
the embedded engine against Redis, raw SQLite, one popping process and the shallow queue's memory.
On a busy machine the ratios are the figures to trust. On a cluster the report names its layout
and storage engine, read from the cluster's status. Beside every figure it prints the store's
commit and read-version latency (medians of 30 of each, at the start and at the end of the run):
a local cluster commits in under a millisecond where a real one takes 2-10 ms, which
scripts/fdb-cluster start --commit-latency 5ms reproduces.

When the Django Tasks framework is installed (Django 6.0+, or django-tasks), the tasks rows run
N trivial tasks through django-fdbqueue's Tasks backend with 1, 4 and 16 worker threads (tasks/s from
the first enqueue to the last SUCCESSFUL result), again with every task enqueued before 1 or 16
worker threads start (as the database backend's row runs; RUNS/S is then the workers' own rate),
with exact and with spread claims (CLAIM_SPREAD), and the same N through the framework's
ImmediateBackend, which runs each task inline: the zero-cost reference ours is divided by. They
use the bench's own backends, never the project's TASKS; without the framework they are skipped.
With django-tasks-db installed (Django 5.2+), the same N also go through django-tasks' database
backend, on a SQLite file of its own in WAL mode, in a process of its own with one db_worker: the
reference of the Tasks goal (VS DB BACKEND); without it, that row is skipped with a note.

Defaults: {defaults} (a few minutes).
With --quick: {quick}.

Progress goes to standard error, the results to standard output. The bench's queues (named
fdbqueue-bench.*; the recipe's keys under ROOT/"bench-recipe") and the task results of its tasks
rows are deleted at the end, also when it is interrupted.

Exit codes: 2 when it cannot run as asked (an unknown strategy; --compare, --recipe or --plot
without the project's benchmarks beside the app, which the wheel leaves out; --compare redis
without redis-server; --plot without matplotlib; a --recipe file without the recipe's code, or
whose code fails to load), found before anything is measured; 3 when the store fails during the
run or a row fails the exactly-once check (the results are still printed and written, so the
failing rows can be seen); 130 when interrupted, once its queues, client processes and Redis
server are cleaned up."""


def _sizes(duration: float, clients: tuple[int, ...], deep_size: int, tasks: int) -> str:
    return (
        f"{duration:g} s per row, clients {','.join(map(str, clients))}, deep size {deep_size:,}, "
        f"{tasks:,} tasks per tasks row"
    )


_DESCRIPTION = _DESCRIPTION.format(
    defaults=_sizes(DEFAULT_DURATION, DEFAULT_CLIENTS, DEFAULT_DEEP_SIZE, DEFAULT_TASKS),
    quick=_sizes(QUICK_DURATION, QUICK_CLIENTS, QUICK_DEEP_SIZE, QUICK_TASKS),
)


def _positive_seconds(text: str) -> float:
    """argparse type for --duration: more than 0 and at most an hour per row."""
    seconds = positive_seconds(text)
    if seconds > 3600:
        raise argparse.ArgumentTypeError(f"expected more than 0 and at most 3600 seconds, got {text}")
    return seconds


def _task_count(text: str) -> int:
    """argparse type for --tasks: a whole number from 0 (which leaves the tasks rows out)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of tasks, got {text!r}") from None
    if not 0 <= count <= 10_000_000:
        raise argparse.ArgumentTypeError(f"expected 0 to 10,000,000 tasks, got {count}")
    return count


def _client_counts(text: str) -> list[int]:
    counts = [positive_int(part.strip()) for part in text.split(",") if part.strip()]
    if not counts:
        raise argparse.ArgumentTypeError("expected client counts such as 1,2,4")
    if max(counts) > 256:
        raise argparse.ArgumentTypeError(f"at most 256 clients, got {max(counts)}")
    return counts


def register(subparsers: Any) -> None:
    """Add ``bench`` to ``manage.py fdbqueue``.

    Long: one flat argparse definition, an option after another, each with its help text.
    """
    parser = add_subcommand(
        subparsers,
        "bench",
        handle_bench,
        help="Measure queue throughput, latency and scaling; compare with FoundationDB's recipe, Redis and SQLite.",
        description=_DESCRIPTION,
    )
    parser.add_argument("--duration", type=_positive_seconds, metavar="SECONDS", help="How long each row is timed.")
    parser.add_argument("--quick", action="store_true", help="Tiny sizes and short rows, for a smoke run.")
    parser.add_argument(
        "--clients",
        type=_client_counts,
        metavar="N,N,...",
        help="Client counts for the concurrent pop rows (1 is always measured).",
    )
    parser.add_argument(
        "--strategy",
        action="append",
        dest="strategies",
        metavar="NAME",
        help=f"A pop strategy to measure; repeat for several. Default: all ({', '.join(available())}).",
    )
    parser.add_argument(
        "--deep-size",
        type=positive_int,
        metavar="N",
        help="Items in the deep queue of the queue-depth rows (the shallow one holds 1,000).",
    )
    parser.add_argument(
        "--compare",
        action="append",
        metavar="REF[,REF]",
        help="Run the same workloads on a reference too: redis, sqlite, or redis,sqlite; repeatable.",
    )
    parser.add_argument(
        "--recipe",
        metavar="PATH",
        help=(
            "FoundationDB's priority-queue recipe (Python, or its documentation page): run it beside the "
            "service on the same store. Without it the recipe rows are left out."
        ),
    )
    parser.add_argument(
        "--tasks",
        type=_task_count,
        metavar="N",
        help=(
            "Tasks per tasks row (Django Tasks through this app's backend with 1, 4 and 16 worker threads, "
            "and through ImmediateBackend and django-tasks' database backend as the references); 0 leaves "
            "the tasks rows out."
        ),
    )
    parser.add_argument(
        "--json-file", metavar="FILE", help="Also write every row and the run's metadata to FILE as JSON."
    )
    parser.add_argument("--plot", metavar="FILE.png", help="Also draw the results as a PNG chart (needs matplotlib).")


def _references(values: list[str]) -> list[str]:
    chosen: list[str] = []
    for value in values:
        for name in (part.strip().lower() for part in value.split(",")):
            if not name:
                continue
            if name == "recipe":
                raise usage_error("The recipe is not started by --compare: give its file with --recipe PATH.")
            if name not in COMPARE_CHOICES:
                raise usage_error(f"--compare takes {' and '.join(COMPARE_CHOICES)}, not {name!r}.")
            if name not in chosen:
                chosen.append(name)
    return chosen


def _writable_target(path: str | None, option: str) -> None:
    """Refuse a FILE whose directory does not exist now, rather than after minutes of measuring."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(directory):
        raise usage_error(f"{option} {path}: the directory {directory} does not exist.")
    if os.path.isdir(path):
        raise usage_error(f"{option} {path} is a directory; give a file name.")


def _last_line(error: Exception) -> str:
    """A client process's failure arrives as its whole traceback: its last line says what happened."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else type(error).__name__
    return f"{lines[0]} {lines[-1]}"


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Let SIGTERM clean up like Ctrl-C: stop the client processes and the Redis server, drop queues."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def handle_bench(ctx: Context, options: dict[str, Any]) -> None:
    """Refuse what cannot run before measuring anything (a run takes minutes), then run and report."""
    config = _config(options)
    json_file, plot = options.get("json_file"), options.get("plot")
    _check_can_run(config, json_file, plot)
    result = _run(ctx, Bench(config, ctx.database()))
    if json_file:
        write_json(result, json_file)
        ctx.stderr.write(f"Wrote the results to {json_file}.")
    if plot:
        write_plot(result, plot)
        ctx.stderr.write(f"Drew the chart in {plot}.")
    if ctx.as_json:
        ctx.stdout.write(compact_json(to_document(result)))
    else:
        ctx.stdout.write(format_report(result))
    if not result.exactly_once_passed:
        more = len(result.failures) - 1
        raise CommandError(
            "Exactly-once check FAILED: " + result.failures[0] + (f" (and {more} more)" if more else ""),
            returncode=EXIT_STORE,
        )


def _config(options: dict[str, Any]) -> BenchConfig:
    """The run's configuration from the options; a bad option or recipe file is a usage error."""
    compare = _references(options.get("compare") or [])
    recipe = None
    if options.get("recipe"):
        try:
            recipe = load_recipe(options["recipe"])
        except RecipeUnavailable as error:
            raise usage_error(str(error)) from None
    try:
        return BenchConfig.build(
            duration=options.get("duration"),
            clients=options.get("clients"),
            strategies=options.get("strategies"),
            deep_size=options.get("deep_size"),
            compare=compare,
            quick=bool(options.get("quick")),
            tasks=options.get("tasks"),
            recipe=recipe,
        )
    except KeyError as error:
        raise usage_error(error.args[0]) from None
    except ValueError as error:
        raise usage_error(str(error)) from None


def _check_can_run(config: BenchConfig, json_file: str | None, plot: str | None) -> None:
    """The output files can be written, matplotlib is there for --plot, each --compare reference can run."""
    _writable_target(json_file, "--json-file")
    _writable_target(plot, "--plot")
    if plot:
        try:
            check_plot_available()
        except PlotUnavailable as error:
            raise usage_error(str(error)) from None
    for name in config.compare:
        try:
            check(name)
        except ReferenceUnavailable as error:
            raise usage_error(str(error)) from None


def _run(ctx: Context, bench: Bench) -> BenchResult:
    """Run the bench with progress on standard error; an interruption or failure is a CommandError."""
    progress = Progress(
        lambda text: ctx.stderr.write(text, style_func=lambda plain: plain, ending=""),
        len(bench.rows),
        live=ctx.stderr.isatty(),
    )
    try:
        with _terminate_as_interrupt():
            result = bench.run(progress)
    except KeyboardInterrupt:
        progress.close()
        raise CommandError(
            "Interrupted; the bench's queues, client processes and Redis server were cleaned up.",
            returncode=EXIT_INTERRUPTED,
        ) from None
    except RecipeUnavailable as error:
        progress.close()
        raise usage_error(str(error)) from None
    except (BenchError, ReferenceUnavailable) as error:
        progress.close()
        raise CommandError(f"The bench failed: {_last_line(error)}", returncode=EXIT_STORE) from error
    except Exception:
        progress.close()
        raise
    progress.close()
    return result
