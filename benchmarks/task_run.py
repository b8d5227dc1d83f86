"""What one tasks row measured: a module of its own, shared by the rows (``task_rows``) and the
database backend's reference (``tasks_db_ref``), which the rows call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TaskRun"]


@dataclass
class TaskRun:
    """What one tasks row measured, and what its exactly-once check found wrong (if anything)."""

    tasks: int
    seconds: float
    enqueue_seconds: float
    rounds: int = 1
    retries: dict[int, int] | None = None
    peak_mib: float | None = None
    problems: list[str] = field(default_factory=list)
    #: With every task enqueued first: from the workers' start to the last result, the workers alone.
    run_seconds: float | None = None

    @property
    def tasks_per_s(self) -> float:
        return self.tasks / self.seconds if self.seconds > 0 else 0.0

    @property
    def run_per_s(self) -> float | None:
        """Tasks/s of the workers alone (rows that enqueue first), not capped by one enqueuing thread."""
        if self.run_seconds is None or self.run_seconds <= 0:
            return None
        return self.tasks / self.run_seconds

    @property
    def enqueue_per_s(self) -> float:
        return self.tasks / self.enqueue_seconds if self.enqueue_seconds > 0 else 0.0
