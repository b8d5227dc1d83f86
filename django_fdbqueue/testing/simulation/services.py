"""The service's other parts in a simulation: tenants, queue admin, schedules, the Tasks worker.

Beside the standard actors (``workload``), each part brings its queues, its actors (counted in
the run's :class:`Shape`, so ``Shape.none()`` still means none) and its oracles: the tenants'
fairness (``actors_tenants``), purges and deletions (``actors_admin``), schedules firing exactly
once (``actors_schedules``), tasks run to a result recorded once (``actors_tasks``), workflows
of those tasks released once and in order (``actors_workflows``), and what
must be gone at the end (``leftovers``).
"""

from __future__ import annotations

import collections
import contextlib
import random
from functools import partial
from typing import Any, Callable, Iterator

from .actors_admin import Admin
from .actors_schedules import QUEUES as SCHEDULE_QUEUES
from .actors_schedules import Schedules
from .actors_tasks import QUEUES as TASK_QUEUES
from .actors_tenants import QUEUES as TENANT_QUEUES
from .actors_tenants import TENANT_QUEUE, Tenants
from .leftovers import Leftovers
from .workload import QUEUES, Actors, Doubt, Shape

#: Every queue name a part may use (a project's own queues must not take them).
NAMES = {*TENANT_QUEUES, *SCHEDULE_QUEUES, *TASK_QUEUES}


def _tasks_available() -> bool:
    """The Tasks part needs Django's settings (a project's TASKS need not name our backend)."""
    from django.conf import settings

    return bool(settings.configured)


class Services:
    """The parts of one run (see the module's docstring)."""

    def __init__(self, actors: Actors, shape: Shape) -> None:
        self.actors = actors
        self.shape = shape
        self.tenants = Tenants(actors)
        self.admin = Admin(actors, shape.admins)
        self.schedules = Schedules(actors)
        self.tasks: Any = None
        if (shape.task_workers or shape.workflows) and _tasks_available():
            from .actors_tasks import Tasks

            self.tasks = Tasks(actors)
        self.leftovers: Leftovers | None = None

    def queues(self) -> dict[str, dict[str, Any]]:
        """The queues to create before the actors start (the admins' own among them)."""
        return {**TENANT_QUEUES, **SCHEDULE_QUEUES, **TASK_QUEUES, **self.admin.queues()}

    def judged_queues(self) -> dict[str, dict[str, Any]]:
        """Those the standard oracle recounts and drains (the others are drained here)."""
        return dict(TENANT_QUEUES)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """What the parts hook into for the run: commits seen, watches noted, the Tasks backend."""
        db = self.actors.db
        self.leftovers = Leftovers(db, self.actors.scheduler, self.actors.history)
        publish = db._signal.publish

        def published(version: int) -> None:
            self.tenants.committed()
            publish(version)

        db._signal.publish = published
        with self.tasks.installed() if self.tasks is not None else contextlib.nullcontext():
            yield

    def spawn(self, skew_us: Callable[[], int]) -> None:
        def spawn(kind: str, count: int, body: Callable[[str, random.Random, int], None]) -> None:
            for n in range(count):
                name = f"{kind}{n}"
                self.actors.doubts[name] = Doubt()
                body_of = partial(body, name, random.Random(f"{self.actors.seed}/{name}"), self.shape.operations)
                self.actors.scheduler.spawn(name, body_of, skew_us=skew_us())

        self.tenants.spawn(self.shape, spawn)
        self.admin.spawn(self.shape, spawn)
        self.schedules.spawn(self.shape, spawn)
        if self.tasks is not None:
            self.tasks.spawn(self.shape, spawn)

    def step(self) -> None:
        self.tenants.step()

    def wound_down(self, skew_ms: float) -> None:
        self.tenants.broken = True  # the drain takes from the ring as it likes
        self.schedules.wound_down(skew_ms)

    def final(self, oracle: Any, stored: collections.Counter[str]) -> None:
        """After the standard drain (faults off): the parts' own drains and checks, then leftovers."""
        self.admin.final(oracle, stored)
        self.schedules.final(oracle)
        if self.tasks is not None:
            self.tasks.final(oracle)
        assert self.leftovers is not None
        self.leftovers.check([*QUEUES, *self.queues()])

    def judge(self) -> None:
        """Before the verdict on every value."""
        self.admin.judge()
        self.actors.history.check_order({TENANT_QUEUE})
