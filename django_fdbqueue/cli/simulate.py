"""``manage.py fdbqueue simulate``: run the deterministic simulation for many seeds.

Each seed is one run of the standard actors on a throwaway embedded store (never the store
FDBQUEUE names), with the faults asked for; see ``django_fdbqueue.testing.simulation``. The
first seed that breaks an invariant stops the run: it is shrunk, and its violations, the one
command line that replays it and the steps that led to it are printed; the exit code is then 1.
Anyone who may run ``manage.py`` may run it: it reads and writes no project data.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from django.core.management.base import CommandError

from .arguments import positive_int
from .base import Context, add_subcommand
from .errors import usage_error
from .output import compact_json

__all__ = ["register", "handle_simulate"]

#: Trace lines printed for a failure (the end of the shrunk run, where it went wrong).
TRACE_LINES = 80


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
    if not 0 < value <= 24 * 60:
        raise argparse.ArgumentTypeError("minutes must be more than 0 and at most 1440")
    return value


def register(subparsers: Any) -> None:
    """Add ``simulate`` to ``manage.py fdbqueue``."""
    parser = add_subcommand(
        subparsers,
        "simulate",
        handle_simulate,
        help="Run the deterministic simulation of many clients for many seeds; exit 1 on a violation.",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    parser.add_argument("--seeds", type=positive_int, default=100, help="How many seeds to run (default 100).")
    parser.add_argument(
        "--seed", type=int, default=None, help="The first seed (default: a fresh one, printed); --seeds 1 replays it."
    )
    parser.add_argument(
        "--faults",
        default="default",
        help="none, default, or NAME=VALUE,... over the defaults (not_committed, unknown_applied, "
        "unknown_not_applied, stall, kill, skew_ms).",
    )
    parser.add_argument("--operations", type=positive_int, default=None, help="Operations per actor (default 12).")
    parser.add_argument("--steps", type=positive_int, default=None, help="Cut each run after this many steps.")
    parser.add_argument("--minutes", type=_minutes, default=None, help="Stop starting seeds after this long.")
    parser.add_argument(
        "--jobs", type=positive_int, default=1, help="Worker processes running seeds side by side (default 1)."
    )
    parser.add_argument(
        "--no-swarm", action="store_true", help="Run every seed with every actor, instead of a mix the seed picks."
    )
    parser.add_argument("--no-shrink", action="store_true", help="Report a failure as found, without shrinking it.")


def _options(options: dict[str, Any]) -> Any:
    from django_fdbqueue.testing.simulation import Faults, Options

    try:
        faults = Faults.parse(options["faults"])
    except ValueError as error:
        raise usage_error(f"--faults: {error}") from None
    chosen = Options(faults=faults, swarm=not options["no_swarm"])
    if options["operations"] is not None:
        chosen = dataclasses.replace(chosen, shape=dataclasses.replace(chosen.shape, operations=options["operations"]))
    if options["steps"] is not None:
        chosen = dataclasses.replace(chosen, max_steps=options["steps"])
    return chosen


def handle_simulate(ctx: Context, options: dict[str, Any]) -> None:
    from django_fdbqueue.testing.simulation.campaign import run_seeds, shrink

    chosen = _options(options)
    first = options["seed"] if options["seed"] is not None else int.from_bytes(os.urandom(4), "big")
    if not ctx.as_json:
        ctx.stderr.write(f"Simulating seeds {first} to {first + options['seeds'] - 1} (faults {chosen.faults.text()})")
    seeds = range(first, first + options["seeds"])
    campaign = run_seeds(seeds, chosen, minutes=options["minutes"], jobs=options["jobs"])
    failed = campaign.failure
    shrunk = failed if failed is None or options["no_shrink"] else shrink(failed)
    summary = {
        "first_seed": first,
        "seeds": len(campaign.results),
        "seconds": round(campaign.seconds, 2),
        "seeds_per_second": round(campaign.seeds_per_second, 2),
        "cpu_seconds": round(campaign.cpu_seconds, 2),
        "cpu_seconds_per_seed": round(campaign.cpu_seconds / max(1, len(campaign.results)), 3),
        "jobs": options["jobs"],
        "operations": sum(r.operations for r in campaign.results),
        "failed_seed": None if failed is None else failed.seed,
        "violations": [] if shrunk is None else [str(v) for v in shrunk.violations],
        "replay": None if shrunk is None else shrunk.replay(),
    }
    if ctx.as_json:
        ctx.stdout.write(compact_json(summary))
    else:
        ctx.stdout.write(
            f"{summary['seeds']} seeds, {summary['operations']} operations in {summary['seconds']} s "
            f"({summary['seeds_per_second']} seeds/s in {summary['jobs']} process(es), "
            f"{summary['cpu_seconds_per_seed']} s of CPU per seed)"
        )
        if shrunk is not None:
            ctx.stdout.write(f"Seed {shrunk.seed} failed:")
            for line in [str(v) for v in shrunk.violations]:
                ctx.stdout.write(f"  {line}")
            ctx.stdout.write(f"Replay: {shrunk.replay()}")
            ctx.stdout.write("Its last steps:")
            for line in shrunk.trace[-TRACE_LINES:]:
                ctx.stdout.write(line)
    if shrunk is not None:
        raise CommandError(f"the simulation of seed {shrunk.seed} broke an invariant", returncode=1)
