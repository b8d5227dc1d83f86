"""``manage.py fdbqueue SUBCOMMAND``: operate the queues from a shell or a script.

This file only dispatches. The subcommands live in ``django_fdbqueue.cli`` (one module per group,
listed in ``cli.SUBCOMMAND_MODULES``), which also documents how to add one.
"""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from django_fdbqueue import cli
from django_fdbqueue.cli.base import UsageParser


class Command(BaseCommand):
    help = (
        "Operate FDB queues: list, create, stats, push, pop, peek, browse, clear, delete; token; "
        "claim, ack, release, extend, dead-letters, requeue, delete-dead-letter, set-max-attempts; "
        "worker; scheduler, schedules; bench. Add --json to any subcommand for JSON output. Exit codes: 0 done, 1 nothing to pop "
        "or peek, 2 bad input, 3 the queue store failed."
    )
    # The settings are read when the store is opened, and a failure there is exit code 3 with
    # its reason; the project-wide checks would only slow every call down (and fail with 1).
    requires_system_checks: list[str] = []
    # Tests and callers may hand in their own standard input: call_command(..., stdin=...).
    stealth_options = ("stdin",)

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # Django builds the top parser itself; give it the subcommands' rule that a usage error
        # is exit code 2 under call_command too (the class adds no state, only error()).
        parser.__class__ = UsageParser
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        cli.add_subcommands(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        ctx = cli.Context(
            stdout=self.stdout,
            stderr=self.stderr,
            stdin=options.get("stdin") or sys.stdin,
            style=self.style,
            as_json=bool(options.get("as_json")),
        )
        cli.run(ctx, options)
