"""``manage.py fdbqueue workflows list|show|cancel``: what each prints, and what each refuses."""

from __future__ import annotations

import pytest

from django_fdbqueue.tasks.workflows import call, chain, get_workflow, group

from . import workflow_tasks as wt
from .cli_helpers import Terminal, ok, run


@pytest.fixture
def running(fdbqueue_db):
    """A chain of three steps: its first member READY, the others WAITING."""
    return chain(call(wt.double, 1), call(wt.double, 2), call(wt.double, 3)).enqueue(name="three")


def test_list_shows_the_running_workflows(running):
    result = ok("workflows", "list")
    assert running.id in result.out and "three" in result.out and "RUNNING" in result.out
    assert ok("workflows", "list", "--status", "cancelled").out.strip() == "No CANCELLED workflows."
    assert ok("workflows", "list", "--ids").out.split() == [running.id]


def test_list_json_pages_with_a_cursor(running):
    second = group(call(wt.double, 4)).enqueue()
    first_page = ok("workflows", "list", "--json", "--limit", "1").json()
    assert [w["id"] for w in first_page["workflows"]] == [running.id]
    rest = ok("workflows", "list", "--json", "--cursor", first_page["next_cursor"]).json()
    assert [w["id"] for w in rest["workflows"]] == [second.id] and rest["next_cursor"] is None


def test_show_prints_the_header_and_the_nodes_a_page_at_a_time(running):
    text = ok("workflows", "show", running.id).out
    assert "STATUS" in text and "RUNNING" in text
    assert "tests.workflow_tasks.double" in text and "READY" in text and "WAITING" in text
    page = ok("workflows", "show", running.id, "--json", "--limit", "2").json()
    assert [(n["index"], n["state"], n["attempts"]) for n in page["nodes"]] == [(0, "READY", 0), (1, "WAITING", 0)]
    assert page["next_cursor"] == "1" and page["size"] == 3
    last = ok("workflows", "show", running.id, "--json", "--cursor", "1").json()
    assert [n["index"] for n in last["nodes"]] == [2] and last["next_cursor"] is None


def test_cancel_with_yes_cancels(running):
    result = ok("workflows", "cancel", running.id, "--yes")
    assert "cancelled" in result.out
    assert get_workflow(running.id).status == "CANCELLED"
    again = ok("workflows", "cancel", running.id, "--yes")
    assert "had already finished (CANCELLED)" in again.out
    assert ok("workflows", "cancel", running.id, "--yes", "--json").json()["status"] == "CANCELLED"


def test_cancel_asks_first_and_a_no_changes_nothing(running):
    assert run("workflows", "cancel", running.id, stdin=Terminal("n\n")).code == 2
    assert get_workflow(running.id).status == "RUNNING"
    ok("workflows", "cancel", running.id, stdin=Terminal("y\n"))
    assert get_workflow(running.id).status == "CANCELLED"


def test_cancel_without_a_terminal_or_yes_is_refused(running):
    result = run("workflows", "cancel", running.id)
    assert result.code == 2 and "--yes" in result.err
    assert get_workflow(running.id).status == "RUNNING"


@pytest.mark.parametrize(
    "args",
    [
        ("show", "nope"),
        ("cancel", "nope", "--yes"),
        ("show", "nope", "--backend", "other"),
        ("list", "--status", "bogus"),
        ("list", "--cursor", "bogus"),
    ],
)
def test_unknown_ids_statuses_and_cursors_are_exit_2(fdbqueue_db, args):
    result = run("workflows", *args)
    assert result.code == 2, result
    assert result.err.strip() and "Traceback" not in result.err


def test_another_backends_workflow_is_not_found(running):
    result = run("workflows", "show", running.id, "--backend", "other")
    assert result.code == 2 and "No workflow" in result.err
