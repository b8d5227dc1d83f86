"""The workflows bench's measured sections (``workflows.py``): the fan-in rate, the commits of a
chain, and a big chord.

- **Fan-in rate** (``--rates``): the pool's workers run N independent tasks, then a chord of N
  members (and the other way round, alternately). Every task of a row is enqueued with one
  ``run_after`` moment, a little after the enqueue ends, so all of a row's tasks become ready
  together, however long enqueueing took; a row's time runs from that moment to the last
  member's finish (as stored in its result). CPU: the workers' processes, and on a cluster the
  fdbserver's, over the same window, per task.
- **Commits per chain link** (``--chain``): N independent tasks, then a chain of N, each run by
  one ``worker --tasks --concurrency 1 --burst`` process on a task queue of their own, with the
  store's commits counted while that worker runs (enqueueing is before, not counted).
- **Big chord** (``--big``): one chord of N members completes.
"""

from __future__ import annotations

import datetime as dt
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from harness import Children, RunFailed, log
from workflow_kills import WorkerPool, chord_bound, enqueue_chord, outcome
from workflow_store import (
    CHAIN_QUEUE_NAME,
    Counted,
    Store,
    commit_counter,
    cpu_seconds,
    read_records,
    wait_finished,
    wait_queue_empty,
)

#: Threads of the driver that enqueue a rate row's independent tasks.
ENQUEUE_THREADS = 8


# -- fan-in rate ------------------------------------------------------------------------------------


def rates(pool: WorkerPool, store: Store, args: Any, directory: Path) -> dict[str, Any]:
    """``args.rate_rounds`` rows of each kind, alternating which goes first; their rates."""
    rows: list[dict[str, Any]] = []
    margin = 2.0 + args.rate_tasks / 200
    for number in range(args.rate_rounds):
        order = ("independent", "chord") if number % 2 == 0 else ("chord", "independent")
        for kind in order:
            row, margin = timely_row(kind, pool, store, args, directory, margin)
            rows.append(row)
            log(
                f"rates: {kind} {row['tasks']} in {row['seconds']} s, {row['tasks_per_s']} tasks/s, "
                f"workers {row['worker_cpu_ms_per_task']} ms CPU a task"
            )
    return {"tasks": args.rate_tasks, "rows": rows, "summary": rate_summary(rows)}


def timely_row(
    kind: str, pool: WorkerPool, store: Store, args: Any, directory: Path, margin: float
) -> tuple[dict[str, Any], float]:
    """A row whose enqueue ended before its ready moment (a late one, whose first tasks ran while
    the last were enqueued, is made again with a longer margin, twice at most); the margin now."""
    for _attempt in range(3):
        row = rate_row(kind, pool, store, args, directory, margin)
        margin = max(margin, 1.5 * row["enqueue_s"] + 1.0)
        if not row["late"]:
            break
        log(f"rates: the {kind} row was enqueued {row['enqueue_s']} s, after its ready moment: again")
    return row, margin


def rate_row(kind: str, pool: WorkerPool, store: Store, args: Any, directory: Path, margin: float) -> dict[str, Any]:
    """One row: N tasks made ready at one moment, run by the pool; rate, CPU, and on a cluster
    the conflicts (1020) per task, counted over the row (enqueueing included)."""
    if store.engine == "embedded":
        return _rate_row(kind, pool, store, args, directory, margin)
    counted, row = commit_counter(store).count(lambda: _rate_row(kind, pool, store, args, directory, margin))
    row["conflicts_per_task"] = round((counted.conflicts or 0) / row["tasks"], 3)
    return row


def _rate_row(kind: str, pool: WorkerPool, store: Store, args: Any, directory: Path, margin: float) -> dict[str, Any]:
    when = time.time() + margin
    run_after = dt.datetime.fromtimestamp(when, tz=dt.timezone.utc)
    begun = time.time()
    if kind == "independent":
        ids, chord = enqueue_independent(args.rate_tasks, run_after), None
    else:
        chord = enqueue_chord(args.rate_tasks, directory / "callback-starts.jsonl", run_after=run_after, name="rate")
        ids = chord.member_ids
    enqueued = time.time()
    start = max(when, enqueued)  # late: some tasks were ready before the last was enqueued
    time.sleep(max(0.0, when - time.time()))
    cpu = (pool.cpu_seconds(), cpu_seconds(store.server_pids))
    bound = chord_bound(args.rate_tasks, args.lease, 60.0)
    if chord is None:
        wait_queue_empty(bound)
    else:
        wait_finished(chord.handle, bound, "a rate row's chord")
    worker_cpu, server_cpu = pool.cpu_seconds() - cpu[0], cpu_seconds(store.server_pids) - cpu[1]
    records = read_records(ids)
    done = [r for r in records if r is not None and r.status == "SUCCESSFUL"]
    finishes = sorted(r.finished_us / 1e6 for r in done)
    last = finishes[-1] if finishes else 0.0
    row = {
        "kind": kind,
        "tasks": len(ids),
        "enqueue_s": round(enqueued - begun, 2),
        "late": enqueued > when,
        "seconds": round(last - start, 3),
        "tasks_per_s": round(len(ids) / (last - start), 1) if last > start else None,
        "not_successful": len(ids) - len(done),
        "rerun": sum(1 for r in done if len(r.worker_ids) > 1),
        # How long the last 5% of the tasks took: a fan-in's last counts would show here.
        "last_5pct_s": round(last - finishes[int(0.95 * (len(finishes) - 1))], 3) if finishes else None,
        "worker_cpu_ms_per_task": round(1000 * worker_cpu / len(ids), 2),
        "server_cpu_ms_per_task": round(1000 * server_cpu / len(ids), 2) if store.server_pids else None,
    }
    if chord is not None:
        found = outcome(chord, directory / "callback-starts.jsonl")
        row["callback_done_s"] = round((found["callback_finished_us"] or 0) / 1e6 - start, 3)
        row["not_successful"] += found["callback_status"] != "SUCCESSFUL"
    return row


def enqueue_independent(count: int, run_after: dt.datetime) -> list[str]:
    """``count`` lone member tasks (member i returns i), enqueued by a few threads."""
    import workflow_bench_tasks as bench_tasks

    delayed = bench_tasks.member.using(run_after=run_after)
    with ThreadPoolExecutor(ENQUEUE_THREADS) as pool:
        return list(pool.map(lambda number: delayed.enqueue(number).id, range(count)))


def rate_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: the median rate and CPU; the ratio of the chord's median rate to the lone tasks'."""
    summary: dict[str, Any] = {}
    for kind in ("independent", "chord"):
        mine = [row for row in rows if row["kind"] == kind]
        rates_ = [row["tasks_per_s"] for row in mine if row["tasks_per_s"]]
        summary[kind] = {
            "rows": len(mine),
            "median_tasks_per_s": round(statistics.median(rates_), 1) if rates_ else None,
            "median_worker_cpu_ms_per_task": _median([row["worker_cpu_ms_per_task"] for row in mine]),
            "median_server_cpu_ms_per_task": _median([row["server_cpu_ms_per_task"] for row in mine]),
            "median_conflicts_per_task": _median([row.get("conflicts_per_task") for row in mine]),
        }
    alone, fan_in = summary["independent"]["median_tasks_per_s"], summary["chord"]["median_tasks_per_s"]
    summary["ratio"] = round(fan_in / alone, 3) if alone and fan_in else None
    summary["not_successful"] = sum(row["not_successful"] for row in rows)
    summary["late_rows"] = sum(1 for row in rows if row["late"])
    return summary


def _median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return round(statistics.median(present), 2) if present else None


# -- commits per chain link ---------------------------------------------------------------------------


def chain_commits(children: Children, store: Store, pool: WorkerPool, args: Any) -> dict[str, Any]:
    """Commits of N lone tasks and of a chain of N, each run by one burst worker thread."""
    import workflow_bench_tasks as bench_tasks
    from django_fdbqueue.tasks.workflows import call, chain

    counter = commit_counter(store)
    links = args.chain
    task = bench_tasks.member.using(queue_name=CHAIN_QUEUE_NAME)
    idle, _ = counter.count(lambda: time.sleep(args.idle_seconds))
    ids = [task.enqueue(number).id for number in range(links)]
    lone, lone_s = counter.count(lambda: run_burst(children, store, pool, links))
    handle = chain(*(call(task, number) for number in range(links))).enqueue(name="chain")
    chained, chain_s = counter.count(lambda: run_burst(children, store, pool, links))
    handle.refresh()
    records = read_records(ids + node_ids(handle))
    failed = sum(1 for r in records if r is None or r.status != "SUCCESSFUL")
    # A cluster counts its own transactions too (its time keeper's, about one a second): taken
    # off each window at the rate the idle window saw. The embedded engine's count is exact.
    rate = idle.commits / idle.window_s if idle.window_s else 0.0
    lone_net, chain_net = _net(lone, rate), _net(chained, rate)
    extra = (chain_net - lone_net) / links
    log(
        f"chain: {lone.commits} commits for {links} lone tasks, {chained.commits} for a chain of {links}: {extra:+.2f} a link"
    )
    return {
        "links": links,
        "counter": "status" if store.engine != "embedded" else "history",
        "background_commits": idle.commits,
        "background_window_s": idle.window_s,
        "background_per_s": round(rate, 3),
        "lone_commits": lone.commits,
        "lone_window_s": lone.window_s,
        "lone_net_commits": round(lone_net, 1),
        "lone_seconds": lone_s,
        "chain_commits": chained.commits,
        "chain_window_s": chained.window_s,
        "chain_net_commits": round(chain_net, 1),
        "chain_seconds": chain_s,
        "commits_per_lone_task": round(lone_net / links, 3),
        "commits_per_link": round(chain_net / links, 3),
        "extra_commits_per_link": round(extra, 3),
        "raw_extra_commits_per_link": round((chained.commits - lone.commits) / links, 3),
        "chain_status": handle.status,
        "not_successful": failed,
        "chain_in_order": in_order(records[links:]),
    }


def _net(counted: Counted, background_per_s: float) -> float:
    return counted.commits - background_per_s * (counted.window_s or 0.0)


def node_ids(handle: Any) -> list[str]:
    """The result ids of a workflow's nodes, in index order (a page of 1,000 at a time)."""
    ids: list[str] = []
    while len(ids) < handle.size:
        page = handle.nodes(after=len(ids) - 1 if ids else None, limit=1000)
        if not page:
            break
        ids += [node.result_id for node in page]
    return ids


def in_order(records: list[Any]) -> bool:
    """Each link started after the one before it finished, and returned its own number."""
    if any(r is None or r.started_us is None or r.finished_us is None for r in records):
        return False
    return all(r.return_value == number for number, r in enumerate(records)) and all(
        later.started_us >= earlier.finished_us for earlier, later in zip(records, records[1:])
    )


def run_burst(children: Children, store: Store, pool: WorkerPool, tasks: int) -> float:
    """One burst worker of one thread on the chain's task queue, until it exits; its seconds."""
    started = time.monotonic()
    child = children.start("burst-worker", pool.command(CHAIN_QUEUE_NAME, 1, burst=True), store.env)
    try:
        child.process.wait(120.0 + tasks)
    except Exception as error:  # noqa: BLE001 - subprocess.TimeoutExpired: the run cannot go on
        child.kill()
        raise RunFailed(f"the burst worker did not finish within {120 + tasks} s") from error
    if child.process.returncode != 0:
        raise RunFailed(f"the burst worker exited with {child.process.returncode}:\n{child.tail()}")
    return round(time.monotonic() - started, 2)


# -- a big chord ---------------------------------------------------------------------------------------


def big_chord(pool: WorkerPool, args: Any, directory: Path) -> dict[str, Any]:
    """One chord of ``args.big`` members: it completes, the callback once, with the right sum."""
    starts = directory / "callback-starts.jsonl"
    log(f"big chord: {args.big} members")
    chord = enqueue_chord(args.big, starts, name="big")
    log(f"big chord enqueued in {chord.enqueue_seconds:.2f} s")
    wait_finished(chord.handle, chord_bound(args.big, args.lease, 60.0), "the big chord")
    found = outcome(chord, starts)
    found["queue_left"] = wait_queue_empty(3 * args.lease + 15.0)
    end = (found["callback_finished_us"] or 0) / 1e6
    expected_sum = args.big * (args.big - 1) // 2
    return {
        "members": args.big,
        "status": found["status"],
        "enqueue_s": round(chord.enqueue_seconds, 2),
        "seconds": round(end - chord.started, 2) if end else None,
        "members_per_s": round(args.big / (end - chord.started), 1) if end else None,
        "members_not_successful": found["members_not_successful"],
        "members_rerun": found["members_rerun"],
        "callback_starts": len(found["callback_starts"]),
        "callback_ok": found["callback_status"] == "SUCCESSFUL" and found["callback_value"] == expected_sum,
        "queue_left": found["queue_left"],
    }
