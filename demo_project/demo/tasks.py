"""Example tasks for the demo: something to compute, an email to send, and one that fails.

Enqueue them from the admin's Tasks page (the demo adds a small form there), then run them with
a worker beside the server::

    cd demo_project && ../.venv/bin/python manage.py fdbqueue worker --tasks

Each is a module-level ``@task`` function, as the Tasks framework requires, so a worker in
another process can import it by its path.
"""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail

try:  # Django 6.0+ has the Tasks framework built in; before, the django-tasks backport provides it
    from django.tasks import task
except ImportError:
    from django_tasks import task

# count_primes refuses more than this, so a typo in the admin form cannot keep a worker busy for long.
MAX_PRIMES_BELOW = 5_000_000


@task()
def count_primes(below: int) -> dict[str, int | None]:
    """How many primes are smaller than ``below``, and the largest of them (a sieve: CPU work)."""
    if not isinstance(below, int) or isinstance(below, bool) or not 0 <= below <= MAX_PRIMES_BELOW:
        raise ValueError(f"below must be a whole number from 0 to {MAX_PRIMES_BELOW:,}; got {below!r}")
    if below < 3:
        return {"below": below, "count": 0, "largest": None}
    sieve = bytearray([1]) * below
    sieve[0:2] = b"\x00\x00"
    for number in range(2, int(below**0.5) + 1):
        if sieve[number]:
            sieve[number * number :: number] = bytes(len(range(number * number, below, number)))
    largest = next(index for index in range(below - 1, 1, -1) if sieve[index])
    return {"below": below, "count": sum(sieve), "largest": largest}


@task(queue_name="emails", priority=10)
def send_welcome_email(address: str, name: str = "there") -> int:
    """Send a welcome email through Django's email backend (the console, in the demo).

    Returns how many messages went out. Its queue is "emails" and its priority 10, so a worker
    sends it before the other tasks waiting there.
    """
    return send_mail(
        subject="Welcome to the django-fdbqueue demo",
        message=f"Hello {name},\n\nthis email was sent by a Django task that a worker ran from a FoundationDB queue.\n",
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[address],
    )


@task(takes_context=True)
def flaky_report(context, fail_attempts: int = 1) -> str:
    """Fail on the first ``fail_attempts`` attempts, then succeed: shows FAILED and Retry.

    A task that raises is FAILED (the framework retries nothing by itself); the admin's Retry
    button queues it again, and the attempt count, which keeps every earlier attempt, grows.
    """
    if context.attempt <= fail_attempts:
        raise ConnectionError(
            f"The report service did not answer (simulated failure, attempt {context.attempt} of the "
            f"first {fail_attempts}). Retry the task from the admin."
        )
    return f"Report built on attempt {context.attempt}."


EXAMPLES = {
    "primes": count_primes,
    "email": send_welcome_email,
    "flaky": flaky_report,
}
