"""The load run's verdicts: each check compares what the journals say happened with what the store
holds, and adds a named pass or fail with the figures behind it to ``Checks``."""

from __future__ import annotations

import collections
from typing import Any

from load_journals import Take
from load_store import integrity_check, take_snapshot

# Seconds after a gunicorn worker's SIGKILL in which clients may see its connections drop.
TRANSPORT_ERROR_WINDOW = 5.0


class Checks:
    """The run's verdicts, in the order they were made."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def add(self, name: str, ok: bool, detail: str) -> None:
        self.items.append({"name": name, "ok": bool(ok), "detail": detail})

    @property
    def ok(self) -> bool:
        return all(check["ok"] for check in self.items)


def overlapping_deliveries(timeline: dict[str, list[Take]]) -> list[str]:
    """Items handed to a second consumer while the first surely still held them.

    The server acted on each request between its ``start`` and its ``answered`` time. A claim
    holds its item until its lease ends (``until``, the end the server set; from older journals
    at the earliest ``start + lease``) or its holder releases it (from the moment the release is
    sent), whichever comes first; a pop holds it for good. Two takes of one item are an overlap
    when neither order is possible: each was answered before the other's holding ended. Every
    time here is read from this machine's one clock, which the server's lease ends come from too,
    so no delay of a client thread can make a legitimate second delivery look like an overlap.
    At-least-once allows a second delivery only once a lease ran out or was given back.
    """
    problems = []
    slack = 0.001  # journal times are rounded to 0.1 ms
    for uid, events in timeline.items():
        events = sorted(events, key=lambda event: (event.start, event.seq))
        takes = [event for event in events if event.kind in ("pop", "claim", "drain")]
        for first, second in zip(takes, takes[1:]):
            second_after_first = second.answered + slack >= held_until(first, events)
            first_after_second = first.answered + slack >= held_until(second, events)
            if not second_after_first and not first_after_second:
                problems.append(
                    f"{uid}: {second.kind} by {second.source} answered at {second.answered:.4f} while "
                    f"{first.kind} by {first.source} answered at {first.answered:.4f} held it until "
                    f"{held_until(first, events):.4f}"
                )
    return problems


def held_until(take: Take, events: list[Take]) -> float:
    """When ``take``'s hold on its item ended: its lease's end, or its holder's release."""
    if take.kind == "pop":
        return float("inf")
    end = take.until if take.until is not None else take.start + take.lease
    later = sorted(
        (event for event in events if event.source == take.source and event.seq > take.seq), key=lambda event: event.seq
    )
    for event in later:  # the holder's own next release of this item, before it took it again
        if event.kind == "release":
            return min(end, event.start)
        if event.kind in ("pop", "claim", "drain"):
            break
    return end


def account(
    journal: dict[str, Any], snapshot: dict[str, Any], checks: Checks, safe: bool, kills: list[dict[str, Any]]
) -> None:
    """The checks on the snapshot: nothing lost, nothing twice, counters agree, no 5xx."""
    consumed_uids = collections.Counter(uid for uid, _, _ in journal["consumed"])
    present_uids = collections.Counter(uid for uid, _, _ in snapshot["present"])
    transport = _response_checks(journal, checks, kills)
    _twice_and_lost_checks(journal, consumed_uids, present_uids, checks)
    found_in_doubt, states = _balance_check(journal, snapshot, consumed_uids, present_uids, checks)
    _counter_check(journal, snapshot, found_in_doubt, checks)
    journal["accounting"] = {
        "pushes_confirmed": len(journal["confirmed"]),
        "pushes_answered_duplicate": journal["duplicates_answered"],
        "pushes_in_doubt": len(journal["in_doubt"]),
        "pushes_in_doubt_found": len(found_in_doubt),
        "consumed": len(consumed_uids),
        "consumed_by_pop": sum(how == "pop" for _, how, _ in journal["consumed"]),
        "consumed_by_ack": sum(how == "ack" for _, how, _ in journal["consumed"]),
        "acks_in_doubt": len(journal["ack_doubt"]),
        "queued_at_end": dict(states),
        "claims": sum(len(events) for events in journal["claims"].values()),
        "items_claimed_more_than_once": sum(len(events) > 1 for events in journal["claims"].values()),
        "transport_errors": transport,
        "safe_mode": safe,
    }


def _response_checks(journal: dict[str, Any], checks: Checks, kills: list[dict[str, Any]]) -> int:
    """No 5xx, no undocumented status, transport errors only where a kill explains them; their count."""
    checks.add(
        "no 5xx response",
        not journal["server_errors"],
        f"{len(journal['server_errors'])} responses >= 500"
        + (f", first: {journal['server_errors'][0]}" if journal["server_errors"] else ""),
    )
    checks.add(
        "only documented statuses",
        not journal["unexpected"],
        ", ".join(f"{key}: {count}" for key, count in journal["unexpected"].items()) or "none other",
    )
    transport = sum(journal["transport_errors"].values())
    # A killed gunicorn worker drops the requests it was serving: those fail at once, and only those.
    server_kills = [event["t"] for event in kills if event["target"] == "gunicorn-worker"]
    stray = [
        t
        for t in journal["transport_error_times"]
        if not any(kill_t <= t <= kill_t + TRANSPORT_ERROR_WINDOW for kill_t in server_kills)
    ]
    checks.add(
        "no transport errors" if not server_kills else "transport errors only where a server worker was killed",
        not stray,
        (", ".join(f"{key}: {count}" for key, count in journal["transport_errors"].items()) or "none")
        + (f"; {len(stray)} not within {TRANSPORT_ERROR_WINDOW:g} s of a kill" if stray else ""),
    )
    return transport


def _twice_and_lost_checks(
    journal: dict[str, Any],
    consumed_uids: collections.Counter[str],
    present_uids: collections.Counter[str],
    checks: Checks,
) -> None:
    """Nothing consumed or stored twice, no confirmed push lost, nothing from nowhere."""
    confirmed, intents, ack_doubt = journal["confirmed"], journal["intents"], journal["ack_doubt"]
    twice = {uid: count for uid, count in consumed_uids.items() if count > 1}
    acked_twice = [item_id for item_id, count in collections.Counter(journal["acked_ids"]).items() if count > 1]
    checks.add(
        "no item popped or acked twice",
        not twice and not acked_twice,
        f"{len(twice)} uids consumed more than once {list(twice.items())[:5]}, {len(acked_twice)} ids acked twice"
        if twice or acked_twice
        else f"{len(consumed_uids)} items consumed, each once",
    )
    stored_twice = [uid for uid, count in present_uids.items() if count > 1]
    both = sorted(set(consumed_uids) & set(present_uids))
    checks.add(
        "no duplicate stored",
        not stored_twice and not both,
        f"{len(stored_twice)} uids stored twice {stored_twice[:5]}, {len(both)} consumed yet still queued {both[:5]}"
        if stored_twice or both
        else "every queued item is there once, and none of them was consumed",
    )
    lost = sorted(
        uid for uid in confirmed if uid not in consumed_uids and uid not in present_uids and uid not in ack_doubt
    )
    checks.add(
        "every confirmed push consumed or still queued",
        not lost,
        f"{len(lost)} lost: {lost[:10]}" if lost else f"{len(confirmed)} confirmed pushes, none lost",
    )
    strays = sorted(uid for uid in set(consumed_uids) | set(present_uids) if uid not in intents)
    checks.add(
        "nothing from nowhere",
        not strays,
        f"{len(strays)} unknown uids {strays[:5]}" if strays else "every item was pushed by a client",
    )


def _balance_check(
    journal: dict[str, Any],
    snapshot: dict[str, Any],
    consumed_uids: collections.Counter[str],
    present_uids: collections.Counter[str],
    checks: Checks,
) -> tuple[set[str], collections.Counter[str]]:
    """Consumed plus still queued equals pushed; the pushes in doubt found, and the queued items per state."""
    confirmed, in_doubt, ack_doubt = journal["confirmed"], journal["in_doubt"], journal["ack_doubt"]
    found_in_doubt = {uid for uid in in_doubt if uid in consumed_uids or uid in present_uids}
    gone_by_doubtful_ack = {uid for uid in ack_doubt if uid not in consumed_uids and uid not in present_uids}
    queued = len(present_uids)
    left = len(consumed_uids) + queued + len(gone_by_doubtful_ack)
    right = len(confirmed) + len(found_in_doubt)
    states = collections.Counter(where for _, where, _ in snapshot["present"])
    checks.add(
        "consumed + still queued == pushed",
        left == right,
        f"popped/acked {len(consumed_uids)} + queued {queued} (ready {states['ready']}, leased {states['leased']}, "
        f"delayed {states['delayed']}, dead {states['dead']}) + gone by an ack in doubt {len(gone_by_doubtful_ack)}"
        f" = {left}; pushed {len(confirmed)} confirmed + {len(found_in_doubt)} of {len(in_doubt)} in doubt = {right}",
    )
    return found_in_doubt, states


def _counter_check(journal: dict[str, Any], snapshot: dict[str, Any], found_in_doubt: set[str], checks: Checks) -> None:
    """Each queue's counters agree with its listed contents, and the pushed counters with the journals."""
    confirmed, in_doubt = journal["confirmed"], journal["in_doubt"]
    counter_problems = []
    total_pushed = 0
    for name, counts in snapshot["counts"].items():
        total_pushed += counts["pushed"]
        queued_counted = counts["ready"] + counts["leased"] + counts["delayed"] + counts["dead"]
        if counts["pushed"] - counts["popped"] != queued_counted:
            counter_problems.append(
                f"{name}: pushed {counts['pushed']} - popped {counts['popped']} != queued {queued_counted}"
            )
        listed = snapshot["listed"][name]
        for key in ("ready", "leased", "delayed", "dead"):
            if listed[key] != counts[key]:
                counter_problems.append(f"{name}: counter {key} {counts[key]} but {listed[key]} listed")
    if not len(confirmed) + len(found_in_doubt) <= total_pushed <= len(confirmed) + len(in_doubt):
        counter_problems.append(
            f"pushed counters {total_pushed} outside [{len(confirmed) + len(found_in_doubt)}, "
            f"{len(confirmed) + len(in_doubt)}]"
        )
    checks.add(
        "queue counters agree with contents",
        not counter_problems,
        "; ".join(counter_problems)
        or f"pushed {total_pushed} = popped/acked + ready + leased + delayed + dead, per queue",
    )


def final_checks(
    journal: dict[str, Any],
    snapshot: dict[str, Any],
    drained: dict[str, Any],
    kills: list[dict[str, Any]],
    checks: Checks,
) -> None:
    """After the drain: leases came back, and every item was consumed exactly once overall.

    Long: one flat list of checks over the run's journal, in the order the report prints them.
    """
    claims, settled = journal["claims"], journal["settled_claims"]
    drained_uids = collections.Counter(uid for uid, _ in drained["taken"]) + collections.Counter(drained["dead"])
    consumed = collections.Counter(uid for uid, _, _ in journal["consumed"])
    killed_client = next((event for event in kills if event["target"] == "client"), None)

    # Leases nobody settled: abandoned on purpose, or held by the killed client process.
    outstanding: list[tuple[str, float, str]] = []
    for uid, events in claims.items():
        for t, source, abandon in events:
            if abandon or (killed_client and source.startswith("p0t") and (source, t) not in settled[uid]):
                outstanding.append((uid, t, "abandoned" if abandon else "killed consumer"))
    back_in_run = back_in_drain = dead = 0
    missing = []
    dead_uids = set(drained["dead"])
    for uid, t, why in outstanding:
        later = [when for when, _, _ in claims[uid] if when > t]
        popped_later = any(u == uid and how == "pop" for u, how, _ in journal["consumed"])
        if later or popped_later:
            back_in_run += 1
        elif uid in drained_uids and uid not in dead_uids:
            back_in_drain += 1
        elif uid in dead_uids:
            dead += 1
        elif uid in journal["ack_doubt"] and why == "killed consumer":
            continue  # the killed process may have acked it in its last moment
        else:
            missing.append((uid, why))
    kinds = collections.Counter(why for _, _, why in outstanding)
    if killed_client:
        checks.add(
            "the killed consumer held leases",
            kinds["killed consumer"] > 0,
            f"{kinds['killed consumer']} leases held by the killed consumer were never settled by it",
        )
    checks.add(
        "leased items come back",
        not missing,
        f"{len(outstanding)} leases never settled ({dict(kinds)}): {back_in_run} claimed again during the run, "
        f"{back_in_drain} after it, {dead} became dead letters (max_attempts)"
        + (f"; {len(missing)} never came back: {missing[:5]}" if missing else ""),
    )

    timeline = {uid: list(events) for uid, events in journal["timeline"].items()}
    for uid, take in drained["takes"]:
        timeline.setdefault(uid, []).append(take)
    overlaps = overlapping_deliveries(timeline)
    redelivered = sum(
        sum(event.kind in ("claim", "drain", "pop") for event in events) > 1 for events in timeline.values()
    )
    checks.add(
        "a second delivery only after the lease ended",
        not overlaps,
        f"{len(overlaps)} items delivered while leased: {overlaps[:3]}"
        if overlaps
        else f"{redelivered} items delivered more than once, each time after the previous lease ended or was released",
    )

    overall = consumed + drained_uids
    wrong = {
        uid: overall.get(uid, 0)
        for uid in journal["confirmed"]
        if overall.get(uid, 0) != 1 and not (uid in journal["ack_doubt"] and overall.get(uid, 0) == 0)
    }
    extra = {uid: count for uid, count in overall.items() if count > 1}
    checks.add(
        "after the drain, every item consumed exactly once",
        not wrong and not extra and drained["empty"],
        f"{sum(overall.values())} consumptions of {len(overall)} items; store empty: {drained['empty']}"
        + (f"; wrong counts {list(wrong.items())[:5]}" if wrong else "")
        + (f"; twice {list(extra.items())[:5]}" if extra else ""),
    )


def task_checks(journal: dict[str, Any], tasks: dict[str, Any], killed_tasks: list[str], checks: Checks) -> None:
    """Tasks ran (or wait to), none failed; a task caught by a worker's kill ran again to success."""
    if killed_tasks:
        records = [tasks["records"].get(task_id) for task_id in killed_tasks]
        came_back = [
            record is not None and record.status == "SUCCESSFUL" and len(record.worker_ids) >= 2 for record in records
        ]
        checks.add(
            "a task running in the killed task worker ran again",
            all(came_back),
            "; ".join(
                f"{record.status if record else 'MISSING'} after {len(record.worker_ids) if record else 0} attempts"
                for record in records
            ),
        )
    statuses = tasks["summary"]["statuses"]
    bad = {status: count for status, count in statuses.items() if status not in ("SUCCESSFUL", "READY", "RUNNING")}
    checks.add(
        "every task SUCCESSFUL or still pending",
        not bad and tasks["summary"]["enqueued"] > 0,
        f"{tasks['summary']['enqueued']} tasks: {statuses}",
    )
    checks.add(
        "every task enqueue succeeded",
        not journal["enqueue_errors"],
        f"{len(journal['enqueue_errors'])} failed: {journal['enqueue_errors'][:3]}"
        if journal["enqueue_errors"]
        else "all answered with a result id",
    )


def backup_checks(backup: dict[str, Any], checks: Checks) -> None:
    """The mid-run copy is sound and self-consistent: it opens, and its counters match its items."""
    from django_fdbqueue import service
    from django_fdbqueue.engines.embedded import EmbeddedDatabase

    integrity = integrity_check(backup["path"])
    database = EmbeddedDatabase(str(backup["path"]))
    try:
        snapshot = take_snapshot(service, database)
    finally:
        database.close()
    problems = []
    for name, counts in snapshot["counts"].items():
        queued = counts["ready"] + counts["leased"] + counts["delayed"] + counts["dead"]
        if counts["pushed"] - counts["popped"] != queued:
            problems.append(f"{name}: pushed - popped != queued")
        problems += [
            f"{name}: {key} counted {counts[key]}, listed {snapshot['listed'][name][key]}"
            for key in ("ready", "leased", "delayed", "dead")
            if counts[key] != snapshot["listed"][name][key]
        ]
    backup["items"] = len(snapshot["present"])
    backup["pushed_so_far"] = sum(counts["pushed"] for counts in snapshot["counts"].values())
    checks.add(
        "an online backup taken mid-run is consistent",
        integrity == "ok" and not problems,
        f"integrity_check {integrity}; {backup['items']} items queued in it, counters "
        + ("agree with its contents" if not problems else f"disagree: {problems[:3]}")
        + f"; copied {backup['bytes']:,} bytes in {backup['seconds']} s while the run wrote",
    )
