"""The workflows bench's report (``workflows.py``): the issue's goals, and the printed tables."""

from __future__ import annotations

from typing import Any

import harness

#: The goals of the workflows issue, at full size.
GOAL_RUNS = 100
GOAL_RATIO = 0.9
GOAL_BIG = 10_000
GOAL_EXTRA_COMMITS = 1.0


def goals(report: dict[str, Any], args: Any) -> list[dict[str, Any]]:
    """Each goal of a section that ran: met or not (None: the section ran smaller than the goal
    says, so it cannot tell), and the figure that says so."""
    found = []
    loop = report.get("kill_loop")
    if loop:
        summary = loop["summary"]
        found.append(
            _goal(
                f"the callback runs exactly once in each of {GOAL_RUNS} runs that kill a worker",
                summary["failures"] == 0 and (summary["runs"] >= GOAL_RUNS or None),
                f"{summary['runs']} runs of {args.members} members, {summary['failures']} failed",
            )
        )
    if report.get("rates"):
        ratio = report["rates"]["summary"]["ratio"]
        found.append(
            _goal(
                f"chord members complete at >= {GOAL_RATIO}x the rate of lone tasks",
                ratio is not None and ratio >= GOAL_RATIO and (args.rate_tasks >= 1000 or None),
                f"{ratio}x ({args.rate_tasks} tasks a row)",
            )
        )
    big = report.get("big")
    if big:
        found.append(
            _goal(
                f"a {GOAL_BIG:,}-member chord completes",
                big["status"] == "SUCCESSFUL" and big["callback_ok"] and (big["members"] >= GOAL_BIG or None),
                f"{big['members']:,} members: {big['status']} in {big['seconds']} s",
            )
        )
    chain = report.get("chain")
    if chain:
        found.append(
            _goal(
                f"a chain adds < {GOAL_EXTRA_COMMITS:g} commit per link beyond its tasks' own",
                chain["extra_commits_per_link"] < GOAL_EXTRA_COMMITS and (chain["links"] >= 100 or None),
                f"{chain['extra_commits_per_link']:+.2f} a link over {chain['links']} links",
            )
        )
    return found


def _goal(name: str, met: bool | None, detail: str) -> dict[str, Any]:
    return {"name": name, "met": None if met is None else bool(met), "detail": detail}


GOAL_WORDS = {True: "MET    ", False: "NOT MET", None: "SMALLER"}


def render(report: dict[str, Any]) -> str:
    config = report["config"]
    latency = report.get("store_latency") or {}
    store = (
        f"a one-process FoundationDB cluster (commits {latency.get('commit_ms', 0):.3g} ms, read versions "
        f"{latency.get('read_version_ms', 0):.3g} ms: medians of {latency.get('samples')})"
        if config["engine"] == "cluster"
        else f"the embedded engine (commits {latency.get('commit_ms', 0):.3g} ms)"
    )
    spread = f"spread {config['spread']}" if config["spread"] else "exact claims"
    lines = [
        f"Workflows bench on {store}; {config['processes']} worker processes x {config['threads_per_process']} "
        f"threads ({spread}), task lease {config['task_lease_s']:g} s; seed {config['seed']}; "
        f"{config['cpus']} CPUs, load average before {' '.join(map(str, config['load_before']))}",
    ]
    for key, part in (("kill_loop", _kill_loop), ("rates", _rates), ("chain", _chain), ("big", _big)):
        if report.get(key):
            lines += ["", *part(report[key], config)]
    lines += [""]
    lines += [f"GOAL {GOAL_WORDS[goal['met']]}  {goal['name']}: {goal['detail']}" for goal in report["goals"]]
    lines += [""] + harness.verdicts(report)
    return "\n".join(lines)


def _kill_loop(loop: dict[str, Any], config: dict[str, Any]) -> list[str]:
    rows = [
        [
            number,
            run["seconds"],
            run["kill_at_s"],
            "yes" if run["kill_during_run"] else "after",
            run["members_rerun"],
            run["callback_starts"],
            run["callback_attempts"],
            ("ok" if run["ok"] else "; ".join(run["problems"]))
            + (" (killed inside the callback)" if run["killed_in_callback"] else ""),
        ]
        for number, run in enumerate(loop["runs"], 1)
    ]
    header = ["RUN", "SECONDS", "KILL AT S", "DURING", "MEMBERS RE-RUN", "CALLBACK STARTS", "ATTEMPTS", "RESULT"]
    summary = loop["summary"]
    cut = (
        f" ({loop['runs_asked']} asked; no run starts after the budget of {loop['budget_s']:g} s)"
        if summary["runs"] < loop["runs_asked"]
        else ""
    )
    return [
        f"Kill loop: {summary['runs']} runs{cut} of a chord of {config['members']} members and a callback; one worker "
        f"process SIGKILLed per run at a moment uniform over {loop['expected_s']} s (a warm-up chord's length)",
        harness.table(rows, header),
        f"Runs {summary['runs']}, failures {summary['failures']}; kills during the run {summary['kills_during_run']}, "
        f"inside the callback {summary['killed_in_callback']}; runs with members re-run {summary['runs_with_reruns']} "
        f"({summary['members_rerun']} members in all); callback starts {summary['callback_starts']}; "
        f"median {summary['median_s']} s, worst {summary['worst_s']} s",
    ]


def _rates(section: dict[str, Any], config: dict[str, Any]) -> list[str]:
    rows = [
        [
            number,
            row["kind"],
            row["tasks"],
            row["seconds"],
            row["tasks_per_s"],
            row.get("last_5pct_s"),
            row.get("rerun"),
            row.get("callback_done_s"),
            row["worker_cpu_ms_per_task"],
            row["server_cpu_ms_per_task"],
            row.get("conflicts_per_task"),
            row["enqueue_s"],
        ]
        for number, row in enumerate(section["rows"], 1)
    ]
    header = ["ROW", "KIND", "TASKS", "SECONDS", "TASKS/S", "LAST 5% S", "RE-RUN", "CALLBACK DONE S"]
    header += ["WORKERS CPU MS/TASK"]
    header += ["FDBSERVER CPU MS/TASK", "CONFLICTS/TASK", "ENQUEUE S"]
    summary = section["summary"]
    alone, fan_in = summary["independent"], summary["chord"]
    return [
        f"Fan-in rate: {section['tasks']} lone tasks vs a chord of {section['tasks']} members, alternately; "
        "seconds from the moment all are ready (one run_after) to the last member's finish",
        harness.table(rows, header),
        f"Medians: lone {alone['median_tasks_per_s']} tasks/s, chord members {fan_in['median_tasks_per_s']}/s: "
        f"ratio {summary['ratio']}x; workers' CPU {alone['median_worker_cpu_ms_per_task']} vs "
        f"{fan_in['median_worker_cpu_ms_per_task']} ms a task, fdbserver's {alone['median_server_cpu_ms_per_task']} "
        f"vs {fan_in['median_server_cpu_ms_per_task']} ms, conflicts {alone['median_conflicts_per_task']} vs "
        f"{fan_in['median_conflicts_per_task']} a task"
        + (f"; {summary['late_rows']} rows enqueued after their ready moment" if summary["late_rows"] else ""),
    ]


def _chain(chain: dict[str, Any], config: dict[str, Any]) -> list[str]:
    exact = chain["counter"] != "status"
    counted = (
        "the embedded engine's commits (its conflict history)"
        if exact
        else "the cluster's committed transactions (status document), less its own at the idle window's rate"
    )
    rows = [
        ["lone tasks", chain["links"], chain["lone_commits"], chain["lone_window_s"], chain["lone_net_commits"]],
        ["chain", chain["links"], chain["chain_commits"], chain["chain_window_s"], chain["chain_net_commits"]],
    ]
    for row, key in zip(rows, ("commits_per_lone_task", "commits_per_link")):
        row.append(chain[key])
    lines = [
        f"Commits per chain link: {chain['links']} lone tasks, then a chain of {chain['links']}, each run by one "
        f"worker thread; counted: {counted}",
        harness.table(rows, ["ROW", "TASKS", "COMMITS", "WINDOW S", "LESS THE CLUSTER'S OWN", "PER TASK"]),
        f"Extra commits per link: {chain['extra_commits_per_link']:+.2f}",
    ]
    if not exact:
        lines[-1] += (
            f" ({chain['raw_extra_commits_per_link']:+.2f} before taking off the cluster's own: "
            f"{chain['background_commits']} commits in an idle window of {chain['background_window_s']} s)"
        )
    return lines


def _big(big: dict[str, Any], config: dict[str, Any]) -> list[str]:
    return [
        f"Big chord: {big['members']:,} members and a callback, {big['status']} in {big['seconds']} s "
        f"({big['members_per_s']} members/s; enqueued in {big['enqueue_s']} s); {big['members_rerun']} members re-run, "
        f"callback started {big['callback_starts']}x, result right: {big['callback_ok']}",
    ]
