"""Enqueue the demo's example tasks during a load run, through the demo's Tasks backend.

Started by ``load.py`` as a process of its own (so the run's fault injection applies to its
enqueues too, as to any web process's). Arguments: the journal path, the number of tasks per
second, and the time (epoch seconds) to stop. Each enqueue is journaled with its result id, or
with the error it raised: the driver then checks that every enqueued task ran.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time


def main() -> int:
    journal_path, rate, end_at = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "demo.settings_load")
    import django

    django.setup()
    from demo import tasks

    chooser = random.Random(os.getpid())
    interval = 1.0 / rate
    next_at = time.time()
    with open(journal_path, "a", buffering=1, encoding="utf-8") as journal:
        while time.time() < end_at:
            kind = chooser.choice(("primes", "primes", "email", "flaky"))
            started = time.perf_counter()
            try:
                if kind == "primes":
                    result = tasks.count_primes.enqueue(chooser.randint(1_000, 30_000))
                elif kind == "email":
                    result = tasks.send_welcome_email.enqueue(f"user{chooser.randint(1, 999)}@example.com")
                else:
                    # fail_attempts=0: it succeeds on its first attempt; a FAILED task is a finding.
                    result = tasks.flaky_report.enqueue(fail_attempts=0)
            except Exception as error:  # noqa: BLE001 - journaled: the driver decides what it means
                event = {"op": "enqueue", "kind": kind, "error": f"{type(error).__name__}: {error}"}
            else:
                event = {"op": "enqueue", "kind": kind, "id": result.id}
            event["ms"] = round((time.perf_counter() - started) * 1000, 3)
            event["t"] = round(time.time(), 4)
            journal.write(json.dumps(event) + "\n")
            next_at += interval
            time.sleep(max(0.0, min(next_at - time.time(), end_at - time.time())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
