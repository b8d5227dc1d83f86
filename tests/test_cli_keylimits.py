"""manage.py fdbqueue and per-key limits: create with limits, push with --key, set-key-limits,
key-limits; bad input exits 2 and stores nothing."""

from __future__ import annotations

import json

import pytest

from django_fdbqueue import service

from .cli_helpers import run


def test_create_push_claim_and_show_the_state(fdbqueue_db):
    created = run("create", "jobs", "--key-concurrency", "1", "--key-rate", "5", "--json")
    assert created.code == 0, created.err
    body = json.loads(created.out)
    assert (body["key_concurrency"], body["key_rate"]) == (1, 5.0)
    assert run("push", "jobs", '"a1"', "--key", "acme").code == 0
    assert run("push", "jobs", '"a2"', "--key", "acme").code == 0
    assert run("push", "jobs", '"free"').code == 0
    claimed = [json.loads(run("claim", "jobs", "--json").out)["item"]["value"] for _ in range(2)]
    assert claimed == ["a1", "free"]
    assert run("claim", "jobs").code == 1  # a2 waits for acme's slot
    state = json.loads(run("key-limits", "jobs", "--json").out)
    assert state == {
        "name": "jobs",
        "concurrency": 1,
        "rate": 5.0,
        "keys_leased": 1,
        "leased": [{"key": "acme", "leased": 1}],
        "at_limit": ["acme"],
    }
    text = run("key-limits", "jobs")
    assert "1 leased at once, 5 claims per second per key" in text.out and "acme" in text.out
    assert "Key limits" in run("stats", "jobs").out


def test_set_key_limits_changes_and_removes(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "jobs", key_concurrency=2)
    done = run("set-key-limits", "jobs", "--rate", "0.5", "--json")
    assert done.code == 0, done.err
    assert (json.loads(done.out)["key_concurrency"], json.loads(done.out)["key_rate"]) == (2, 0.5)
    done = run("set-key-limits", "jobs", "--concurrency", "none")
    assert done.code == 0 and "0.5 claims per second per key" in done.out
    assert service.get_queue(db, "jobs").key_concurrency is None


@pytest.mark.parametrize(
    "args",
    [
        ("set-key-limits", "jobs", "--concurrency", "0"),
        ("set-key-limits", "jobs", "--concurrency", "-3"),
        ("set-key-limits", "jobs", "--rate", "0"),
        ("set-key-limits", "jobs", "--rate", "-1"),
        ("set-key-limits", "jobs", "--rate", "lots"),
        ("push", "jobs", '"v"', "--key", "x" * 101),
        ("push", "jobs", '"v"', "--key", ""),
    ],
)
def test_bad_input_exits_2_and_stores_nothing(fdbqueue_db, args):
    db = fdbqueue_db
    service.create_queue(db, "jobs", key_concurrency=3, key_rate=2)
    result = run(*args)
    assert result.code == 2, (result.code, result.err)
    info = service.get_queue(db, "jobs")
    assert (info.key_concurrency, info.key_rate, info.pushed) == (3, 2.0, 0)


@pytest.mark.parametrize("flag", [("--key-concurrency", "0"), ("--key-rate", "-2")])
def test_create_with_a_bad_limit_exits_2_and_creates_nothing(fdbqueue_db, flag):
    assert run("create", "jobs", *flag).code == 2
    assert not service.queue_exists(fdbqueue_db, "jobs")
