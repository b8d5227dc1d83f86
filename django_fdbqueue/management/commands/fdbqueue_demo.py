"""Seed a few sample queues so the admin pages and the API have something to show.

Run it as often as you like: each sample queue is created and filled in one transaction, only
when it does not exist yet, so a second run (or two runs at once) adds nothing. Queues the user
has changed since are left alone; ``--reset`` deletes and re-creates the samples.

It also takes care of the login: with DJANGO_SUPERUSER_USERNAME and DJANGO_SUPERUSER_PASSWORD in
the environment it creates that superuser (once); otherwise it prints the exact step to create
one, and the address of the queue pages.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.urls import NoReverseMatch, reverse

from django_fdbqueue import service
from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import FDBError, transactional

# (name, kind, [(value, priority), ...]): small, varied, and telling of what each kind does.
SAMPLE_QUEUES: list[tuple[str, str, list[tuple[Any, int]]]] = [
    (
        "demo.emails",
        "fifo",
        [
            ({"to": "ada@example.com", "template": "welcome"}, 0),
            ({"to": "grace@example.com", "template": "password-reset"}, 0),
            ({"to": "linus@example.com", "template": "weekly-digest", "attempt": 2}, 0),
        ],
    ),
    (
        "demo.jobs",
        "priority",
        [
            ({"job": "rebuild-search-index", "shard": 3}, 5),
            ({"job": "send-invoices", "month": "2026-10"}, 10),
            ({"job": "resize-image", "path": "uploads/cat.png", "sizes": [64, 256]}, 1),
            ({"job": "page-on-call", "reason": "disk 95% full"}, 100),
            ({"job": "cleanup-tmp"}, -5),
        ],
    ),
    (
        "demo.scores",
        "priority",
        [
            ({"player": "blue", "score": 1200}, 1200),
            ({"player": "red", "score": 950}, 950),
            ({"player": "green", "score": 1200}, 1200),
            ("<script>alert('values are shown as text')</script>", 0),
        ],
    ),
]


@transactional
def seed_queue(tr: Any, name: str, kind: str, items: list[tuple[Any, int]]) -> bool:
    """Create and fill one sample queue unless it exists; True when this call created it."""
    if service.queue_exists(tr, name):
        return False
    service.create_queue(tr, name, kind)
    for value, priority in items:
        service.push(tr, name, value, priority)
    return True


class Command(BaseCommand):
    help = (
        "Create a few sample FDB queues with items (idempotent), and a superuser when "
        "DJANGO_SUPERUSER_USERNAME and DJANGO_SUPERUSER_PASSWORD are set."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--reset",
            action="store_true",
            help="Delete the sample queues first, so they start again with their sample items.",
        )
        parser.add_argument(
            "--base-url",
            default="http://127.0.0.1:8000",
            help="Where the site will be served, for the address printed at the end.",
        )

    def handle(self, *args: Any, reset: bool = False, base_url: str = "http://127.0.0.1:8000", **options: Any) -> None:
        try:
            self.seed(reset=reset)
        except FDBError as error:
            raise CommandError(
                f"The queue store did not answer ({error}); check the FDBQUEUE settings "
                "and, for a real cluster, that it is up."
            ) from error
        self.login_step()
        self.stdout.write(f"Queue pages in the admin: {base_url.rstrip('/')}{self.admin_path()}")

    def seed(self, *, reset: bool) -> None:
        database = get_database()
        for name, kind, items in SAMPLE_QUEUES:
            if reset and service.queue_exists(database, name):
                service.delete_queue(database, name)
            if seed_queue(database, name, kind, items):
                self.stdout.write(self.style.SUCCESS(f"Created {kind} queue {name} with {len(items)} items."))
            else:
                self.stdout.write(f"Queue {name} already exists: left as it is.")

    def login_step(self) -> None:
        """Create the superuser from the environment, or say exactly how to create one."""
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME")
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        users = get_user_model()
        try:
            if username and password:
                if users._default_manager.filter(**{users.USERNAME_FIELD: username}).exists():
                    self.stdout.write(f"Superuser {username} already exists: log in with it.")
                else:
                    # Reads DJANGO_SUPERUSER_USERNAME / _PASSWORD / _EMAIL from the environment;
                    # the default user model requires an e-mail, so a demo one stands in.
                    extra = {}
                    if "email" in users.REQUIRED_FIELDS and not os.environ.get("DJANGO_SUPERUSER_EMAIL"):
                        extra["email"] = f"{username}@example.com"
                    call_command("createsuperuser", interactive=False, verbosity=0, **extra)
                    self.stdout.write(self.style.SUCCESS(f"Created superuser {username}."))
                return
            has_superuser = users._default_manager.filter(is_superuser=True).exists()
        except DatabaseError as error:
            raise CommandError(
                f"The user tables are not ready ({error}): run `python manage.py migrate` first."
            ) from error
        if not has_superuser:
            self.stdout.write(
                "No superuser yet. Create one to log in:\n"
                f"    {self.python()} {self.manage_py()} createsuperuser\n"
                "(or set DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_PASSWORD and optionally "
                "DJANGO_SUPERUSER_EMAIL, and run this command again)"
            )

    @staticmethod
    def python() -> str:
        """The interpreter running this command, so the step uses the same environment."""
        if not sys.executable:
            return "python"
        relative = os.path.relpath(sys.executable)
        return relative if len(relative) < len(sys.executable) else sys.executable

    @staticmethod
    def manage_py() -> str:
        """How the user invoked manage.py, so the printed step can be pasted as it is."""
        script = sys.argv[0] if sys.argv else ""
        return script if Path(script).name == "manage.py" else "manage.py"

    @staticmethod
    def admin_path() -> str:
        try:
            return reverse("admin:fdbqueue_queue_changelist")
        except NoReverseMatch:
            return "/admin/"
