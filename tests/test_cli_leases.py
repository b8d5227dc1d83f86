"""``manage.py fdbqueue``: claim, ack, release, extend, dead letters, and the new push/pop/create options."""

from __future__ import annotations

import datetime as dt
import io
import sys
import threading
import time

import pytest

from django_fdbqueue import service
from django_fdbqueue.service.extension import runtime

from .cli_helpers import Result, Terminal, ok, run


def refused(*args: str, message: str = "", stdin: io.StringIO | None = None) -> Result:
    """Exit code 2, nothing on standard output, and the reason (containing ``message``) on stderr."""
    result = run(*args, stdin=stdin)
    assert result.code == 2, (args, result)
    assert result.out == ""
    assert message.lower() in result.err.lower(), (args, result.err)
    return result


@pytest.fixture
def jobs(fdbqueue_db):
    """A FIFO queue with two items, "a" then "b"."""
    service.create_queue(fdbqueue_db, "jobs")
    service.push(fdbqueue_db, "jobs", "a")
    service.push(fdbqueue_db, "jobs", "b")
    return fdbqueue_db


@pytest.fixture
def dead(fdbqueue_db):
    """A queue allowing one attempt, with two dead letters ("x", "y") and one ready item ("z")."""
    service.create_queue(fdbqueue_db, "fragile", max_attempts=1)
    for value in ("x", "y"):
        service.push(fdbqueue_db, "fragile", value)
        lease = service.claim(fdbqueue_db, "fragile", lease=30)
        assert service.release(fdbqueue_db, lease.receipt) == "dead"
    service.push(fdbqueue_db, "fragile", "z")
    return fdbqueue_db


# --- claim -----------------------------------------------------------------------------------


def test_claim_prints_the_item_and_its_receipt(jobs):
    lines = ok("claim", "jobs", "--lease", "60").out.splitlines()
    assert [line.split("  ")[0] for line in lines] == [
        "Receipt",
        "Lease expires at",
        "ID",
        "Priority",
        "Attempts",
        "Enqueued at",
        "Value",
    ]
    receipt = lines[0].split()[1]
    assert service.receipt_queue(receipt) == "jobs"
    assert lines[4].split()[-1] == "1" and lines[6].split()[-1] == '"a"'

    data = ok("claim", "jobs", "--json").json()
    assert set(data) == {"receipt", "lease_expires_at", "item"}  # the names REST uses
    assert data["item"]["value"] == "b" and data["item"]["attempts"] == 1
    assert data["lease_expires_at"].endswith("Z")
    expires = dt.datetime.fromisoformat(data["lease_expires_at"].replace("Z", "+00:00"))
    left = (expires - dt.datetime.now(dt.timezone.utc)).total_seconds()
    assert 20 < left <= 30  # the default lease is 30 s

    info = service.get_queue(jobs, "jobs")
    assert (info.size, info.leased) == (0, 2)


def test_claim_from_an_empty_queue_exits_1(jobs):
    ok("claim", "jobs")
    ok("claim", "jobs")
    for args in (("claim", "jobs"), ("claim", "jobs", "--json"), ("claim", "jobs", "--wait", "0.2")):
        result = run(*args)
        assert result.code == 1, args
        assert result.out == "" and "no item to claim" in result.err


def test_claim_with_wait_gets_an_item_pushed_meanwhile(fdbqueue_db):
    service.create_queue(fdbqueue_db, "later")
    service.push(fdbqueue_db, "later", "soon", delay=0.3)
    started = time.monotonic()
    data = ok("claim", "later", "--wait", "10", "--json").json()
    assert data["item"]["value"] == "soon"
    assert time.monotonic() - started < 9


def test_claim_refuses_bad_numbers(jobs):
    refused("claim", "jobs", "--lease", "0", message="more than 0")
    refused("claim", "jobs", "--lease", "-3", message="more than 0")
    refused("claim", "jobs", "--lease", "soon", message="number of seconds")
    refused("claim", "jobs", "--lease", "nan", message="finite")
    refused("claim", "jobs", "--lease", "50000", message="lease")  # over the service's 12 hours
    refused("claim", "jobs", "--wait", "0", message="more than 0")
    refused("claim", "jobs", "--wait", "4000", message="wait")
    refused("claim", "nope", message="No queue is named 'nope'")
    assert service.get_queue(jobs, "jobs").leased == 0


# --- ack, release, extend ---------------------------------------------------------------------


def receipt_of(*args: str) -> str:
    return ok("claim", *args, "--json").json()["receipt"]


def test_ack_removes_the_item(jobs):
    receipt = receipt_of("jobs")
    assert ok("ack", "jobs", receipt).out == "Acknowledged: the item is removed from queue 'jobs'.\n"
    info = service.get_queue(jobs, "jobs")
    assert (info.size, info.leased) == (1, 0)
    assert ok("ack", "jobs", receipt_of("jobs"), "--json").json() == {"name": "jobs", "acked": True}
    # Twice: the same answer (a retry after a timeout is safe); a release finds the lease over.
    assert ok("ack", "jobs", receipt).out == "Acknowledged: the item is removed from queue 'jobs'.\n"
    refused("release", "jobs", receipt, message="lease is over")


def test_bad_receipts_are_refused(jobs):
    receipt = receipt_of("jobs")
    service.create_queue(jobs, "other")
    for subcommand in (("ack",), ("release",), ("extend",)):
        extra = ("--lease", "60") if subcommand == ("extend",) else ()
        refused(*subcommand, "jobs", "not-a-receipt", *extra, message="not a receipt")
        refused(*subcommand, "other", receipt, *extra, message="belongs to queue 'jobs'")
    assert service.get_queue(jobs, "jobs").leased == 1  # untouched


def test_an_expired_lease_cannot_be_acked_released_or_extended(jobs):
    receipt = receipt_of("jobs", "--lease", "0.1")
    time.sleep(0.3)
    for args in (("ack", "jobs", receipt), ("release", "jobs", receipt), ("extend", "jobs", receipt, "--lease", "30")):
        result = refused(*args)
        assert "expired" in result.err or "lease is over" in result.err, result.err


def test_an_expired_item_comes_back_with_its_attempts(jobs):
    receipt_of("jobs", "--lease", "0.1")
    time.sleep(0.3)
    data = ok("claim", "jobs", "--json").json()
    assert (data["item"]["value"], data["item"]["attempts"]) == ("a", 2)


def test_release_now_or_later(jobs):
    receipt = receipt_of("jobs")
    assert ok("release", "jobs", receipt).out == "Released: the item is back in queue 'jobs'.\n"
    assert service.peek(jobs, "jobs").value == "a"

    receipt = receipt_of("jobs")
    result = ok("release", "jobs", receipt, "--delay", "30", "--json").json()
    assert result == {"name": "jobs", "state": "delayed"}
    info = service.get_queue(jobs, "jobs")
    assert (info.size, info.delayed, info.leased) == (1, 1, 0)
    assert service.peek(jobs, "jobs").value == "b"  # "a" is hidden for 30 s

    receipt = receipt_of("jobs")
    refused("release", "jobs", receipt, "--delay", "-1", message="0 seconds or more")
    refused("release", "jobs", receipt, "--delay", "1e12", message="delay")
    assert service.get_queue(jobs, "jobs").leased == 1  # still held


def test_release_of_a_last_attempt_makes_a_dead_letter(fdbqueue_db):
    service.create_queue(fdbqueue_db, "once", max_attempts=1)
    service.push(fdbqueue_db, "once", "v")
    receipt = receipt_of("once")
    assert "now a dead letter" in ok("release", "once", receipt).out
    assert service.get_queue(fdbqueue_db, "once").dead == 1


def test_extend_moves_the_end_of_the_lease(jobs):
    claimed = ok("claim", "jobs", "--lease", "5", "--json").json()
    extended = ok("extend", "jobs", claimed["receipt"], "--lease", "600", "--json").json()
    assert extended["receipt"] == claimed["receipt"]
    assert extended["lease_expires_at"] > claimed["lease_expires_at"]
    assert extended["item"]["id"] == claimed["item"]["id"]
    text = ok("extend", "jobs", claimed["receipt"], "--lease", "60").out
    assert text.splitlines()[0].split() == ["Receipt", claimed["receipt"]]

    refused("extend", "jobs", claimed["receipt"], "--lease", "0", message="more than 0")
    refused("extend", "jobs", claimed["receipt"], "--lease", "ten", message="number of seconds")
    refused("extend", "jobs", claimed["receipt"], "--lease", "99999", message="lease")
    refused("extend", "jobs", claimed["receipt"], message="--lease")  # the new length is missing


# --- dead letters -----------------------------------------------------------------------------


def test_dead_letters_list_and_pages(dead):
    lines = ok("dead-letters", "fragile").out.splitlines()
    assert lines[0].split() == ["ID", "PRIORITY", "ATTEMPTS", "DIED", "AT", "VALUE"]
    assert [line.split()[-1] for line in lines[1:]] == ['"x"', '"y"']
    assert all(line.split()[2] == "1" for line in lines[1:])

    first = ok("dead-letters", "fragile", "--limit", "1", "--json").json()
    assert [d["value"] for d in first["dead_letters"]] == ["x"]
    assert set(first["dead_letters"][0]) == {"id", "priority", "value", "enqueued_at", "attempts", "died_at"}
    rest = ok("dead-letters", "fragile", "--limit", "1", "--cursor", first["next_cursor"], "--json").json()
    assert [d["value"] for d in rest["dead_letters"]] == ["y"] and rest["next_cursor"] is None
    assert "Next page: add --cursor " in ok("dead-letters", "fragile", "--limit", "1").out

    refused("dead-letters", "fragile", "--cursor", "nonsense", message="cursor")
    refused("dead-letters", "fragile", "--limit", "0", message="at least 1")
    refused("dead-letters", "nope", message="No queue is named 'nope'")


def test_no_dead_letters_is_a_success(jobs):
    assert ok("dead-letters", "jobs").out == "No dead letters.\n"
    assert ok("dead-letters", "jobs", "--json").json() == {"dead_letters": [], "next_cursor": None}


def test_requeue_puts_a_dead_letter_back_in_order(dead):
    first = service.dead_letters(dead, "fragile").items[0].item
    text = ok("requeue", "fragile", first.id).out
    assert '"x"' in text and "attempts start over" in text
    assert [i.value for i in service.browse(dead, "fragile").items] == ["x", "z"]  # its old place
    assert service.get_queue(dead, "fragile").dead == 1

    second = service.dead_letters(dead, "fragile").items[0].item
    data = ok("requeue", "fragile", second.id, "--json").json()
    assert data["value"] == "y" and data["attempts"] == 0 and data["id"] == second.id

    assert ok("requeue", "fragile", second.id, "--json").json() == data  # repeated: as the first did
    refused("delete-dead-letter", "fragile", second.id, "--yes", message="dead letter")  # not dead any more
    refused("requeue", "fragile", "garbage", message="")


def test_delete_dead_letter_asks_first(dead, monkeypatch):
    letter = service.dead_letters(dead, "fragile").items[0].item

    declined = refused("delete-dead-letter", "fragile", letter.id, stdin=Terminal("n\n"), message="Not confirmed")
    assert f"Delete dead letter {letter.id} of queue 'fragile'?" in declined.err
    assert service.get_queue(dead, "fragile").dead == 2

    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))  # piped: cannot ask
    refused("delete-dead-letter", "fragile", letter.id, message="standard input is not a terminal")

    accepted = run("delete-dead-letter", "fragile", letter.id, stdin=Terminal("y\n"))
    assert accepted.code == 0 and accepted.out == f"Deleted dead letter {letter.id} of queue 'fragile'.\n"
    assert [d.item.value for d in service.dead_letters(dead, "fragile").items] == ["y"]

    other = service.dead_letters(dead, "fragile").items[0].item
    data = ok("delete-dead-letter", "fragile", other.id, "--yes", "--json").json()
    assert data == {"name": "fragile", "id": other.id, "deleted": True}
    assert service.get_queue(dead, "fragile").dead == 0
    assert ok("delete-dead-letter", "fragile", other.id, "--yes", "--json").json() == data  # as the first did
    refused("requeue", "fragile", other.id, message="dead letter")
    refused("delete-dead-letter", "nope", other.id, stdin=Terminal("y\n"), message="No queue is named 'nope'")


# --- max attempts -----------------------------------------------------------------------------


def test_set_max_attempts(jobs):
    assert "at most 3 claims per item" in ok("set-max-attempts", "jobs", "3").out
    assert service.get_queue(jobs, "jobs").max_attempts == 3
    data = ok("set-max-attempts", "jobs", "none", "--json").json()
    assert data["max_attempts"] is None and data["name"] == "jobs"
    assert service.get_queue(jobs, "jobs").max_attempts is None

    refused("set-max-attempts", "jobs", "0", message="max_attempts")
    refused("set-max-attempts", "jobs", "1001", message="max_attempts")
    refused("set-max-attempts", "jobs", "many", message="whole number or 'none'")
    refused("set-max-attempts", "nope", "3", message="No queue is named 'nope'")


def test_create_with_max_attempts(fdbqueue_db):
    assert ok("create", "limited", "--max-attempts", "5").out == (
        "Created fifo queue 'limited', at most 5 claims per item.\n"
    )
    assert service.get_queue(fdbqueue_db, "limited").max_attempts == 5
    data = ok("create", "open", "--json").json()
    assert data["max_attempts"] is None
    refused("create", "bad", "--max-attempts", "0", message="max_attempts")
    refused("create", "bad", "--max-attempts", "x", message="whole number")
    assert not service.queue_exists(fdbqueue_db, "bad")


# --- list and stats show the hidden and dead items ---------------------------------------------


def test_list_and_stats_count_leased_delayed_and_dead(dead):
    service.push(dead, "fragile", "later", delay=600)
    service.push(dead, "fragile", "held")
    service.claim(dead, "fragile", lease=600)  # takes "z", the first ready one

    lines = ok("list").out.splitlines()
    assert lines[0].split()[:6] == ["NAME", "KIND", "SIZE", "LEASED", "DELAYED", "DEAD"]
    assert lines[1].split()[:6] == ["fragile", "fifo", "1", "1", "1", "2"]

    queue = ok("list", "--json").json()["queues"][0]
    assert (queue["size"], queue["leased"], queue["delayed"], queue["dead"]) == (1, 1, 1, 2)
    assert queue["max_attempts"] == 1

    text = ok("stats", "fragile").out
    for line in (
        "Size         1",
        "Leased       1",
        "Delayed      1",
        "Dead         2",
        "Attempts     at most 1 claim per item",
    ):
        assert line in text, text
    data = ok("stats", "fragile", "--json").json()
    assert (data["leased"], data["delayed"], data["dead"], data["max_attempts"]) == (1, 1, 2, 1)
    service.create_queue(dead, "free")
    assert "Attempts     unlimited" in ok("stats", "free").out


# --- push --delay / --not-before / --dedup-key, pop --wait ----------------------------------------


def test_push_with_a_delay_hides_the_item(jobs):
    item = ok("push", "jobs", '"later"', "--delay", "600", "--json").json()
    assert item["value"] == "later"
    info = service.get_queue(jobs, "jobs")
    assert (info.size, info.delayed) == (2, 1)
    (row,) = service.scheduled(jobs, "jobs").items
    assert row.state == "delayed" and row.item.id == item["id"]
    assert (row.visible_at - dt.datetime.now(dt.timezone.utc)).total_seconds() > 590

    refused("push", "jobs", "1", "--delay", "-5", message="0 seconds or more")
    refused("push", "jobs", "1", "--delay", "1e9", message="delay")  # over 366 days
    refused("push", "jobs", "1", "--delay", "5", "--not-before", "2030-01-01T00:00:00Z", message="not allowed with")


def test_push_not_before_needs_a_zone(jobs):
    at = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).replace(microsecond=0)
    ok("push", "jobs", '"at nine"', "--not-before", at.isoformat().replace("+00:00", "Z"))
    (row,) = service.scheduled(jobs, "jobs").items
    assert row.visible_at == at

    refused("push", "jobs", "1", "--not-before", "2030-01-01T09:00:00", message="no time zone")
    refused("push", "jobs", "1", "--not-before", "tomorrow", message="ISO 8601")
    refused("push", "jobs", "1", "--not-before", "2999-01-01T00:00:00Z", message="366 days")


def test_push_a_file_with_a_delay(jobs):
    ok("push", "jobs", "--file", "-", "--delay", "600", stdin=io.StringIO("1\n2\n"))
    assert service.get_queue(jobs, "jobs").delayed == 2
    refused("push", "jobs", "--file", "-", "--dedup-key", "k", stdin=io.StringIO("1\n"), message="--dedup-key")


def test_push_with_a_dedup_key(jobs):
    first = ok("push", "jobs", '{"order": 7}', "--dedup-key", "order-7", "--json").json()
    assert first["duplicate"] is False
    again = ok("push", "jobs", '{"order": 8}', "--dedup-key", "order-7", "--json").json()
    assert again["duplicate"] is True and again["id"] == first["id"]
    assert again["value"] == {"order": 7}  # the stored item, not the value this push sent
    text = ok("push", "jobs", '{"order": 7}', "--dedup-key", "order-7").out
    assert "Duplicate" in text and "nothing was added" in text
    assert service.get_queue(jobs, "jobs").size == 3
    assert ok("push", "jobs", '"plain"', "--json").json()["duplicate"] is False  # always there, as over REST

    refused("push", "jobs", "1", "--dedup-key", "", message="dedup_key")
    refused("push", "jobs", "1", "--dedup-key", "k" * 201, message="dedup_key")


def test_pop_wait(fdbqueue_db):
    service.create_queue(fdbqueue_db, "slow")
    service.push(fdbqueue_db, "slow", "soon", delay=0.3)
    assert ok("pop", "slow", "--wait", "10", "--json").json()["value"] == "soon"

    empty = run("pop", "slow", "--wait", "0.2")
    assert empty.code == 1 and "is empty (waited 0.2s)" in empty.err and empty.out == ""

    for value in ("a", "b", "c"):
        service.push(fdbqueue_db, "slow", value)
    assert [i["value"] for i in ok("pop", "slow", "-n", "2", "--wait", "5", "--json").json()] == ["a", "b"]
    assert [i["value"] for i in ok("pop", "slow", "-n", "5", "--wait", "5", "--json").json()] == ["c"]

    refused("pop", "slow", "--wait", "0", message="more than 0")
    refused("pop", "slow", "--wait", "7200", message="wait")


# --- the worker subcommand's input errors (its running is in test_worker.py) ------------------


def test_worker_refuses_a_bad_handler_or_option(jobs):
    refused("worker", "jobs", "--handler", "tests.no_such_module.handle", message="Cannot import the handler")
    refused("worker", "jobs", "--handler", "tests.worker_handlers.missing", message="Cannot import the handler")
    refused("worker", "jobs", "--handler", "nodots", message="Cannot import the handler")
    refused("worker", "jobs", "--handler", "tests.worker_handlers.NOT_CALLABLE", message="not a callable")
    refused("worker", "jobs", message="--handler")  # required
    handler = "tests.worker_handlers.wait_for_go"
    refused("worker", "jobs", "--handler", handler, "--concurrency", "0", message="at least 1")
    refused("worker", "jobs", "--handler", handler, "--concurrency", "5000", message="concurrency")
    refused("worker", "jobs", "--handler", handler, "--lease", "0", message="more than 0")
    refused("worker", "jobs", "--handler", handler, "--lease", "50000", message="lease")
    refused("worker", "jobs", "--handler", handler, "--end", "max", message="FIFO")
    refused("worker", "nope", "--handler", handler, message="No queue is named 'nope'")
    assert service.get_queue(jobs, "jobs").size == 2  # nothing was claimed


# --- issue 17: one name for one thing, and the contract breaks -------------------------------------


def test_extend_still_takes_seconds_as_its_old_positional_spelling(jobs):
    claimed = ok("claim", "jobs", "--lease", "5", "--json").json()
    extended = ok("extend", "jobs", claimed["receipt"], "600", "--json").json()  # deprecated, still accepted
    ends = dt.datetime.fromisoformat(extended["lease_expires_at"].replace("Z", "+00:00"))
    assert 500 < (ends - dt.datetime.now(dt.timezone.utc)).total_seconds() <= 600
    refused("extend", "jobs", claimed["receipt"], "60", "--lease", "60", message="not both")


def _until_past(moment: str) -> None:
    """Poll (with a deadline) until the wall clock has passed an ISO time the CLI printed."""
    end = dt.datetime.fromisoformat(moment.replace("Z", "+00:00"))
    deadline = time.monotonic() + 10
    while dt.datetime.now(dt.timezone.utc) <= end:
        assert time.monotonic() < deadline, "the lease never ran out"
        threading.Event().wait(0.02)


def test_a_lease_that_is_gone_is_refused_the_same_way_whatever_the_code(jobs):
    """Both service codes read "Lease gone (<reason>)": a script matches one phrase."""
    short = ok("claim", "jobs", "--lease", "0.1", "--json").json()
    _until_past(short["lease_expires_at"])
    for args in (("ack",), ("release",), ("extend", "--lease", "30")):
        result = refused(args[0], "jobs", short["receipt"], *args[1:])
        assert result.err.startswith("Lease gone (expired): "), result.err
    acked = ok("claim", "jobs", "--json").json()["receipt"]
    ok("ack", "jobs", acked)
    for args in (("release",), ("extend", "--lease", "30")):  # a repeated ack answers as the first
        result = refused(args[0], "jobs", acked, *args[1:])
        assert result.err.startswith("Lease gone (not_found): "), result.err


def test_wait_has_the_one_cap_of_every_face(jobs):
    for subcommand in ("pop", "claim"):
        result = refused(subcommand, "jobs", "--wait", "20.5", message="wait")
        assert "20" in result.err, result.err


@pytest.mark.parametrize("subcommand", ["pop", "claim"])
def test_a_waiting_pop_or_claim_fails_as_soon_as_its_queue_is_deleted(fdbqueue_db, monkeypatch, subcommand):
    """Exit code 2 with "No queue", promptly: not exit 1 ("nothing came") after the whole wait."""

    service.create_queue(fdbqueue_db, "doomed")
    asleep = threading.Event()
    real = runtime.wait_on

    def wait_on(watch, seconds):
        asleep.set()
        return real(watch, seconds)

    monkeypatch.setattr(runtime, "wait_on", wait_on)
    errors: list[BaseException] = []

    def delete_once_asleep() -> None:
        try:
            assert asleep.wait(10), "the command never started waiting"
            service.delete_queue(fdbqueue_db, "doomed")
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    deleter = threading.Thread(target=delete_once_asleep, daemon=True)
    deleter.start()
    started = time.monotonic()
    result = run(subcommand, "doomed", "--wait", "20")
    deleter.join(10)
    assert not deleter.is_alive() and not errors, errors
    assert result.code == 2 and result.out == "", result
    assert "No queue is named 'doomed'" in result.err
    assert time.monotonic() - started < 10
