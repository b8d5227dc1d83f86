"""The workflows bench's task workers, and its kill loop (``workflows.py --runs``).

The pool is P ``manage.py fdbqueue worker --tasks`` processes of T/P threads each on the task
queue ``default``, started once and kept across the runs. One kill run enqueues a chord of N
members and a callback, SIGKILLs one worker process (chosen at random) at a random moment,
uniform over the run's expected length, and starts a replacement at once; the members that
worker held come back when their lease ends. Then it checks: the workflow SUCCESSFUL, every
member SUCCESSFUL, the callback started once and returned the members' sum, the queue empty.
"""

from __future__ import annotations

import json
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness import Children, RunFailed, log
from workflow_store import QUEUE_NAME, cpu_seconds, read_records, wait_finished, wait_queue_empty

#: Seconds a worker process may take to start and run its first task.
WORKER_START_SECONDS = 120.0


class WorkerPool:
    """The run's task worker processes: started once, one killed and replaced now and then."""

    def __init__(self, children: Children, env: dict[str, str], processes: int, threads: int, spread: int | None):
        self.children, self.env = children, env
        self.processes = processes
        self.per_process = max(1, threads // processes)
        self.spread = spread
        self.workers: list[harness.Child] = []
        self.killed: list[int] = []

    def command(self, queue_name: str = QUEUE_NAME, concurrency: int | None = None, burst: bool = False) -> list[str]:
        args = ["fdbqueue", "worker", "--tasks", "--queue", queue_name]
        args += ["--concurrency", str(concurrency or self.per_process)]
        if self.spread and not burst:
            args += ["--spread", str(self.spread)]
        return harness.manage(*args, *(["--burst"] if burst else []))

    def start(self) -> None:
        for _ in range(self.processes):
            self.workers.append(self.children.start("worker", self.command(), self.env))

    def wait_ready(self, directory: Path) -> None:
        """Rounds of pings until every worker process has run one (bounded)."""
        import workflow_bench_tasks as bench_tasks

        path = directory / "pings.txt"
        deadline = time.monotonic() + WORKER_START_SECONDS
        while not set(self.pids) <= _pids_in(path):
            if time.monotonic() > deadline:
                raise RunFailed(f"not every task worker ran a task within {WORKER_START_SECONDS:g} s")
            self.check_alive()
            for _ in range(self.processes * self.per_process):
                bench_tasks.ping.enqueue(str(path))
            wait_queue_empty(WORKER_START_SECONDS)

    @property
    def pids(self) -> list[int]:
        return [worker.pid for worker in self.workers]

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pids)

    def check_alive(self) -> None:
        for worker in self.workers:
            if not worker.alive():
                raise RunFailed(f"task worker {worker.pid} exited with {worker.process.returncode}:\n{worker.tail()}")

    def kill_one(self, rng: random.Random) -> dict[str, Any]:
        """SIGKILL one worker process (picked by ``rng``) and start its replacement at once."""
        index = rng.randrange(len(self.workers))
        victim = self.workers[index]
        at = time.time()
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(10)
        self.killed.append(victim.pid)
        self.workers[index] = self.children.start("worker", self.command(), self.env)
        return {"pid": victim.pid, "replaced_by": self.workers[index].pid, "t": at}

    def stop(self) -> dict[str, Any]:
        """SIGTERM every worker (they finish the task in hand); their exit codes."""
        return {str(worker.pid): worker.stop(grace=30.0) for worker in self.workers}


def _pids_in(path: Path) -> set[int]:
    if not path.exists():
        return set()
    return {int(line) for line in path.read_text(encoding="utf-8").split() if line.isdigit()}


# -- one chord ------------------------------------------------------------------------------------


@dataclass
class Chord:
    """A chord as enqueued: its handle, its members' and callback's result ids, when it began."""

    handle: Any
    member_ids: list[str]
    callback_id: str
    members: int
    started: float
    enqueue_seconds: float


def enqueue_chord(members: int, starts: Path, *, pause: float = 0.0, run_after: Any = None, name: str = "") -> Chord:
    """A chord of ``members`` (member i returns i) and the callback that sums them."""
    import workflow_bench_tasks as bench_tasks
    from django_fdbqueue.tasks.workflows import Workflow, call, group

    member_task = bench_tasks.member if run_after is None else bench_tasks.member.using(run_after=run_after)
    workflow = Workflow(name=name)
    nodes = workflow.add(group(*(call(member_task, number, pause) for number in range(members))))
    last = workflow.add(call(bench_tasks.callback, str(starts)), after=nodes)
    started = time.time()
    handle = workflow.enqueue()
    return Chord(handle, [node.result_id for node in nodes], last.result_id, members, started, time.time() - started)


def callback_starts(starts: Path, result_id: str) -> list[dict[str, Any]]:
    """The callback's starts the file recorded for this result id, in order."""
    if not starts.exists():
        return []
    found = []
    for line in starts.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill
        if entry.get("id") == result_id:
            found.append(entry)
    return sorted(found, key=lambda entry: entry["t"])


def chord_bound(members: int, lease: float, expected: float) -> float:
    """How long a chord may take before the run gives up on it."""
    return 120.0 + 4 * lease + 5 * expected + members / 5


def outcome(chord: Chord, starts: Path) -> dict[str, Any]:
    """What a finished chord left: statuses, attempts, the callback's starts and value, the queue."""
    records = read_records(chord.member_ids + [chord.callback_id])
    members, callback = records[:-1], records[-1]
    return {
        "status": chord.handle.status,
        "members_not_successful": sum(1 for r in members if r is None or r.status != "SUCCESSFUL"),
        "members_rerun": sum(1 for r in members if r is not None and len(r.worker_ids) > 1),
        "callback_status": None if callback is None else callback.status,
        "callback_attempts": 0 if callback is None else len(callback.worker_ids),
        "callback_value": None if callback is None else callback.return_value,
        "callback_starts": callback_starts(starts, chord.callback_id),
        "last_member_finished_us": max((r.finished_us or 0 for r in members if r is not None), default=0),
        "callback_finished_us": None if callback is None else callback.finished_us,
    }


# -- the kill loop ---------------------------------------------------------------------------------


def kill_loop(pool: WorkerPool, args: Any, directory: Path) -> dict[str, Any]:
    """A warm-up chord (its length is the runs' expected length), then ``args.runs`` kill runs."""
    starts = directory / "callback-starts.jsonl"
    rng = random.Random(args.seed)
    warm = enqueue_chord(args.members, starts, name="warm-up")
    wait_finished(warm.handle, chord_bound(args.members, args.lease, 60.0), "the warm-up chord")
    expected = (warm.handle.finished_at.timestamp() - warm.started) if warm.handle.finished_at else 1.0
    log(
        f"kill loop: {args.runs} runs, kill moments uniform over {expected:.2f} s (the warm-up chord), seed {args.seed}"
    )
    runs: list[dict[str, Any]] = []
    ends = time.monotonic() + (args.budget if args.budget else float("inf"))
    for number in range(args.runs):
        if time.monotonic() > ends:
            log(f"kill loop: the budget of {args.budget:g} s is spent after {number} runs")
            break
        runs.append(kill_run(pool, args, starts, rng, expected, number))
        row = runs[-1]
        log(
            f"run {number + 1}/{args.runs}: {row['seconds']} s, kill at {row['kill_at_s']} s "
            f"({'during' if row['kill_during_run'] else 'after'} the run), {row['members_rerun']} members re-run, "
            f"callback started {row['callback_starts']}x{' (killed inside it)' if row['killed_in_callback'] else ''}"
            f"{'' if row['ok'] else ': ' + '; '.join(row['problems'])}"
        )
    return {
        "expected_s": round(expected, 3),
        "seed": args.seed,
        "runs_asked": args.runs,
        "budget_s": args.budget,
        "runs": runs,
        "summary": summarize(runs),
    }


def kill_run(
    pool: WorkerPool, args: Any, starts: Path, rng: random.Random, expected: float, number: int
) -> dict[str, Any]:
    """One run: a chord, a worker SIGKILLed at a random moment, then the checks."""
    pool.check_alive()
    offset = rng.uniform(0.0, expected)
    chord = enqueue_chord(args.members, starts, name=f"kill-run-{number}")
    time.sleep(max(0.0, chord.started + offset - time.time()))
    chord.handle.refresh()
    during = not chord.handle.is_finished
    kill = pool.kill_one(rng)
    wait_finished(chord.handle, chord_bound(args.members, args.lease, expected), f"the chord of run {number + 1}")
    found = outcome(chord, starts)
    found["queue_left"] = wait_queue_empty(3 * args.lease + 15.0)
    return judge(chord, found, kill, during, offset, args.members)


def judge(
    chord: Chord, found: dict[str, Any], kill: dict[str, Any], during: bool, offset: float, members: int
) -> dict[str, Any]:
    """A run's row: its figures and what went wrong (``problems``; none for a good run)."""
    starts = found["callback_starts"]
    # A kill inside the callback (its first start was on the killed worker, before the kill) makes
    # it run again, as any task whose worker dies: counted apart, not a failure.
    killed_inside = len(starts) == 2 and starts[0]["pid"] == kill["pid"] and starts[0]["t"] < kill["t"]
    expected_sum = members * (members - 1) // 2
    problems = []
    if found["status"] != "SUCCESSFUL":
        problems.append(f"workflow {found['status']}")
    if found["members_not_successful"]:
        problems.append(f"{found['members_not_successful']} members not SUCCESSFUL")
    if len(starts) != 1 and not killed_inside:
        problems.append(f"callback started {len(starts)} times (pids {[s['pid'] for s in starts]})")
    if found["callback_status"] != "SUCCESSFUL" or found["callback_value"] != expected_sum:
        problems.append(f"callback {found['callback_status']} returned {found['callback_value']}, not {expected_sum}")
    if any(found["queue_left"].values()):
        problems.append(f"task queue not empty: {found['queue_left']}")
    end_us = found["callback_finished_us"] or 0
    return {
        "workflow": chord.handle.id,
        "seconds": round(end_us / 1e6 - chord.started, 2) if end_us else None,
        "kill_at_s": round(offset, 2),
        "kill_during_run": during,
        "killed_pid": kill["pid"],
        "status": found["status"],
        "members_not_successful": found["members_not_successful"],
        "members_rerun": found["members_rerun"],
        "callback_starts": len(starts),
        "callback_attempts": found["callback_attempts"],
        "killed_in_callback": killed_inside,
        "callback_ok": found["callback_status"] == "SUCCESSFUL" and found["callback_value"] == expected_sum,
        "queue_left": found["queue_left"],
        "ok": not problems,
        "problems": problems,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    times = [run["seconds"] for run in runs if run["seconds"] is not None]
    return {
        "runs": len(runs),
        "failures": sum(1 for run in runs if not run["ok"]),
        "kills_during_run": sum(1 for run in runs if run["kill_during_run"]),
        "killed_in_callback": sum(1 for run in runs if run["killed_in_callback"]),
        "runs_with_reruns": sum(1 for run in runs if run["members_rerun"]),
        "members_rerun": sum(run["members_rerun"] for run in runs),
        "callback_starts": sum(run["callback_starts"] for run in runs),
        "worst_s": max(times, default=None),
        "median_s": harness.percentile(times, 0.5),
    }
