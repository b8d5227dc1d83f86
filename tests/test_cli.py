"""``manage.py fdbqueue``: every subcommand, both output formats, every exit code, the prompts."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_fdbqueue import cli, service
from django_fdbqueue.cli import base as cli_base
from django_fdbqueue.cli.base import add_subcommand
from django_fdbqueue.fdbapi import make_error

from .cli_helpers import Terminal, ok, run

REPO_ROOT = Path(__file__).resolve().parents[1]
ISO_UTC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"


@pytest.fixture
def jobs(fdbqueue_db):
    """A priority queue with three items at priorities 1, 5 and 5 (pushed in that order)."""
    service.create_queue(fdbqueue_db, "jobs", kind="priority")
    service.push(fdbqueue_db, "jobs", {"job": "low"}, priority=1)
    service.push(fdbqueue_db, "jobs", {"job": "high-a"}, priority=5)
    service.push(fdbqueue_db, "jobs", {"job": "high-b"}, priority=5)
    return fdbqueue_db


def values(db, name: str) -> list:
    return [item.value for item in service.browse(db, name, limit=1000).items]


# --- list, create, stats ------------------------------------------------------------------------


def test_create_and_list(fdbqueue_db):
    assert ok("create", "emails").out == "Created fifo queue 'emails'.\n"
    created = ok("create", "jobs", "--kind", "priority", "--json").json()
    assert created["name"] == "jobs" and created["kind"] == "priority" and created["size"] == 0
    assert service.get_queue(fdbqueue_db, "jobs").kind == "priority"
    service.push(fdbqueue_db, "jobs", "x", priority=-3)

    lines = ok("list").out.splitlines()
    assert lines[0].split() == [
        "NAME",
        "KIND",
        "SIZE",
        "LEASED",
        "DELAYED",
        "DEAD",
        "MIN",
        "MAX",
        "OLDEST",
        "PUSHED",
        "POPPED",
    ]
    assert lines[1].split() == ["emails", "fifo", "0", "0", "0", "0", "-", "-", "-", "0", "0"]
    assert lines[2].split()[:8] == ["jobs", "priority", "1", "0", "0", "0", "-3", "-3"]
    assert len(lines) == 3

    listed = ok("list", "--json").json()
    assert [q["name"] for q in listed["queues"]] == ["emails", "jobs"]
    assert listed["next_cursor"] is None
    assert listed["queues"][1]["min_priority"] == -3
    assert listed["queues"][1]["oldest_age_seconds"] >= 0


def test_list_pages_and_prefix(fdbqueue_db):
    for name in ("a.1", "a.2", "a.3", "b.1"):
        service.create_queue(fdbqueue_db, name)
    first = ok("list", "--prefix", "a.", "--limit", "2", "--json").json()
    assert [q["name"] for q in first["queues"]] == ["a.1", "a.2"]
    second = ok("list", "--prefix", "a.", "--limit", "2", "--cursor", first["next_cursor"], "--json").json()
    assert [q["name"] for q in second["queues"]] == ["a.3"]
    assert second["next_cursor"] is None

    text = ok("list", "--limit", "3").out
    assert "More queues: add --cursor " in text
    assert "b.1" not in text


def test_list_without_queues(fdbqueue_db):
    assert ok("list").out == "No queues.\n"
    assert ok("list", "--json").json() == {"queues": [], "next_cursor": None}


def test_stats(jobs):
    text = ok("stats", "jobs").out
    assert "Queue        jobs" in text
    assert "Priorities   1 .. 5" in text
    assert "Size         3" in text
    data = ok("stats", "jobs", "--json").json()
    assert data["size"] == 3 and data["pushed"] == 3 and data["popped"] == 0
    assert (data["min_priority"], data["max_priority"]) == (1, 5)
    assert data["oldest_enqueued_at"].endswith("Z") and data["created_at"].endswith("Z")


def test_create_refuses_bad_input(fdbqueue_db):
    service.create_queue(fdbqueue_db, "emails")
    exists = run("create", "emails")
    assert exists.code == 2 and "already exists" in exists.err and exists.out == ""
    assert run("create", "no spaces").code == 2
    bad_kind = run("create", "x", "--kind", "lifo")
    assert bad_kind.code == 2 and "invalid choice" in bad_kind.err
    assert not service.queue_exists(fdbqueue_db, "x")


def test_unknown_queue_is_exit_2_for_every_subcommand(fdbqueue_db):
    for args in (
        ("stats", "nope"),
        ("push", "nope", "1"),
        ("pop", "nope"),
        ("peek", "nope"),
        ("browse", "nope"),
        ("clear", "nope", "--yes"),
        ("delete", "nope", "--yes"),
    ):
        result = run(*args)
        assert result.code == 2, args
        assert result.err.strip() == "No queue is named 'nope'.", args
        assert result.out == ""


# --- push ---------------------------------------------------------------------------------------


def test_push_one_value(jobs):
    text = ok("push", "jobs", '{"job": "new"}', "--priority", "9").out.splitlines()
    assert text[0].split() == ["ID", "PRIORITY", "ENQUEUED", "AT", "VALUE"]
    assert text[1].split()[1] == "9" and text[1].endswith('{"job":"new"}')

    item = ok("push", "jobs", '"text"', "--json").json()
    assert set(item) == {"id", "priority", "value", "enqueued_at", "attempts", "duplicate"}  # as over REST
    assert item["value"] == "text" and item["priority"] == 0
    assert service.get_item(jobs, "jobs", item["id"]).value == "text"
    assert service.peek_max(jobs, "jobs").value == {"job": "new"}


def test_push_refuses_bad_values(jobs):
    for value, message in (
        ("hello", "quoted as a JSON string"),
        ("{", "not valid JSON"),
        ("NaN", "NaN is not a JSON value"),
        ("1e400", "out of the range"),
    ):
        result = run("push", "jobs", value)
        assert result.code == 2, value
        assert message in result.err, result.err
    assert run("push", "jobs", "1", "--priority", str(2**63)).code == 2
    assert run("push", "jobs", "1", "--priority", "high").code == 2
    assert run("push", "jobs").code == 2  # neither a value nor --file
    assert service.size(jobs, "jobs") == 3


def test_push_to_a_fifo_queue_takes_only_priority_0(fdbqueue_db):
    service.create_queue(fdbqueue_db, "emails")
    result = run("push", "emails", "1", "--priority", "3")
    assert result.code == 2 and "FIFO" in result.err
    ok("push", "emails", "1")
    assert service.size(fdbqueue_db, "emails") == 1


def test_push_from_a_file(jobs, tmp_path):
    path = tmp_path / "values.jsonl"
    path.write_text('{"n": 1}\n\n"two"\n[3]\n', encoding="utf-8")
    assert ok("push", "jobs", "--file", str(path), "--priority", "7").out == "Pushed 3 items to queue 'jobs'.\n"
    pushed = service.browse(jobs, "jobs", end="max", limit=3).items
    assert [(i.value, i.priority) for i in pushed] == [({"n": 1}, 7), ("two", 7), ([3], 7)]

    assert run("push", "jobs", "1", "--file", str(path)).code == 2
    missing = run("push", "jobs", "--file", str(tmp_path / "missing.jsonl"))
    assert missing.code == 2 and "Cannot read" in missing.err


def test_push_from_standard_input(jobs):
    items = ok("push", "jobs", "--file", "-", "--json", stdin=io.StringIO('"a"\n"b"\n')).json()
    assert [i["value"] for i in items] == ["a", "b"]
    assert values(jobs, "jobs")[:2] == ["a", "b"]  # priority 0, below the others
    assert ok("push", "jobs", "--file", "-", stdin=io.StringIO("")).out == "Pushed 0 items to queue 'jobs'.\n"
    assert run("push", "nope", "--file", "-", stdin=io.StringIO("")).code == 2


def test_a_bad_line_pushes_nothing(jobs):
    result = run("push", "jobs", "--file", "-", stdin=io.StringIO('"fine"\n{oops}\n'))
    assert result.code == 2
    assert "Line 2 of standard input is not valid JSON" in result.err
    assert service.size(jobs, "jobs") == 3


# --- pop, peek, browse --------------------------------------------------------------------------


def test_pop_from_either_end(jobs):
    text = ok("pop", "jobs").out
    assert '{"job":"low"}' in text and "ID" in text
    item = ok("pop", "jobs", "--end", "max", "--json").json()
    assert item["value"] == {"job": "high-a"} and item["priority"] == 5
    assert values(jobs, "jobs") == [{"job": "high-b"}]


def test_pop_many(jobs):
    items = ok("pop", "jobs", "-n", "2", "--end", "max", "--json").json()
    assert [i["value"]["job"] for i in items] == ["high-a", "high-b"]
    items = ok("pop", "jobs", "-n", "10", "--json").json()  # fewer than asked is still a success
    assert [i["value"]["job"] for i in items] == ["low"]
    assert run("pop", "jobs", "-n", "0").code == 2


def test_pop_and_peek_on_an_empty_queue_exit_1(fdbqueue_db):
    service.create_queue(fdbqueue_db, "empty", kind="priority")
    for args in (("pop",), ("pop", "-n", "3"), ("peek",), ("peek", "--end", "max"), ("peek", "-n", "3")):
        for fmt in ((), ("--json",)):
            result = run(*args, "empty", *fmt)
            assert result.code == 1, args
            assert result.err.strip() == "Queue 'empty' is empty."
            assert result.out == ""


def test_max_end_of_a_fifo_queue_is_refused(fdbqueue_db):
    service.create_queue(fdbqueue_db, "emails")
    service.enqueue(fdbqueue_db, "emails", 1)
    result = run("pop", "emails", "--end", "max")
    assert result.code == 2 and "FIFO" in result.err
    assert run("pop", "emails", "--end", "middle").code == 2
    assert service.size(fdbqueue_db, "emails") == 1


def test_peek_leaves_the_items(jobs):
    assert '{"job":"high-a"}' in ok("peek", "jobs", "--end", "max").out
    assert ok("peek", "jobs", "--json").json()["value"] == {"job": "low"}
    items = ok("peek", "jobs", "-n", "2", "--end", "max", "--json").json()
    assert [i["value"]["job"] for i in items] == ["high-a", "high-b"]
    assert service.size(jobs, "jobs") == 3
    too_many = run("peek", "jobs", "-n", "1001")
    assert too_many.code == 2 and "browse" in too_many.err


def test_peek_n_is_one_page_of_browse(jobs, monkeypatch):
    calls = []
    real_browse = service.browse

    def browse(*args, **kwargs):
        calls.append(kwargs)
        return real_browse(*args, **kwargs)

    monkeypatch.setattr(service, "browse", browse)
    ok("peek", "jobs", "-n", "2")
    assert calls == [{"end": "min", "limit": 2}]


def test_browse_pages_through_the_items(jobs):
    first = ok("browse", "jobs", "--end", "max", "--limit", "2", "--json").json()
    assert [i["value"]["job"] for i in first["items"]] == ["high-a", "high-b"]
    rest = ok("browse", "jobs", "--end", "max", "--limit", "2", "--cursor", first["next_cursor"], "--json").json()
    assert [i["value"]["job"] for i in rest["items"]] == ["low"]
    assert rest["next_cursor"] is None

    text = ok("browse", "jobs", "--limit", "2").out
    assert text.splitlines()[0].split() == ["ID", "PRIORITY", "ENQUEUED", "AT", "VALUE"]
    assert "Next page: add --cursor " in text
    assert service.size(jobs, "jobs") == 3

    bad = run("browse", "jobs", "--cursor", "not-a-cursor")
    assert bad.code == 2 and "cursor" in bad.err
    assert run("browse", "jobs", "--limit", "5000").code == 2


def test_browse_an_empty_queue_is_a_success(fdbqueue_db):
    service.create_queue(fdbqueue_db, "empty")
    assert ok("browse", "empty").out == "No items.\n"
    assert ok("browse", "empty", "--json").json() == {"items": [], "next_cursor": None}


def test_values_and_times_in_the_output(fdbqueue_db):
    service.create_queue(fdbqueue_db, "mixed")
    service.enqueue(fdbqueue_db, "mixed", {"text": "line\nbreak \u00e9", "n": [1, 2]})
    service.enqueue(fdbqueue_db, "mixed", b"\x00\xff")
    text = ok("peek", "mixed", "-n", "2").out
    assert '{"text":"line\\nbreak \u00e9","n":[1,2]}' in text  # compact, one line
    assert len(text.splitlines()) == 3
    items = ok("peek", "mixed", "-n", "2", "--json").json()
    assert items[1]["value"] == {"$base64": "AP8="}
    assert all(re.fullmatch(ISO_UTC, i["enqueued_at"]) for i in items)


# --- clear and delete, with their confirmation -------------------------------------------------


def test_clear_and_delete_with_yes(jobs):
    assert ok("clear", "jobs", "--yes").out == "Removed 3 items from queue 'jobs'.\n"
    assert service.size(jobs, "jobs") == 0 and service.queue_exists(jobs, "jobs")
    assert ok("clear", "jobs", "--yes", "--json").json() == {"name": "jobs", "removed": 0}
    service.push(jobs, "jobs", 1)
    assert ok("delete", "jobs", "--yes", "--json").json() == {"name": "jobs", "deleted": True}
    assert not service.queue_exists(jobs, "jobs")
    service.create_queue(jobs, "again")
    assert ok("delete", "again", "--yes").out == "Deleted queue 'again'.\n"


def test_clear_asks_y_or_n(jobs):
    declined = run("clear", "jobs", stdin=Terminal("n\n"))
    assert declined.code == 2
    assert "Remove all 3 items from queue 'jobs'? [y/N]" in declined.err
    assert "Not confirmed" in declined.err
    assert service.size(jobs, "jobs") == 3
    assert run("clear", "jobs", stdin=Terminal("")).code == 2  # end of input declines too

    accepted = run("clear", "jobs", stdin=Terminal("y\n"))
    assert accepted.code == 0 and accepted.out == "Removed 3 items from queue 'jobs'.\n"
    assert service.size(jobs, "jobs") == 0


def test_delete_asks_for_the_queue_name(jobs):
    declined = run("delete", "jobs", stdin=Terminal("yes\n"))
    assert declined.code == 2
    assert "Type the queue name to confirm" in declined.err
    assert service.queue_exists(jobs, "jobs")

    accepted = run("delete", "jobs", "--json", stdin=Terminal("jobs\n"))
    assert accepted.code == 0
    assert accepted.json() == {"name": "jobs", "deleted": True}  # the prompt is not on stdout
    assert not service.queue_exists(jobs, "jobs")


def test_without_a_terminal_clear_and_delete_need_yes(jobs, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("jobs\n"))  # piped input: isatty() is false
    for subcommand in ("clear", "delete"):
        result = run(subcommand, "jobs")
        assert result.code == 2
        assert "standard input is not a terminal" in result.err and "--yes" in result.err
    assert service.size(jobs, "jobs") == 3


# --- store errors -------------------------------------------------------------------------------


def test_a_store_error_is_exit_3(jobs, monkeypatch):
    def timed_out(*args, **kwargs):
        raise make_error(1031)

    monkeypatch.setattr(service, "get_queue", timed_out)
    monkeypatch.setattr(service, "pop", timed_out)
    for args in (("stats", "jobs"), ("pop", "jobs", "--json")):
        result = run(*args)
        assert result.code == 3
        assert "The queue store failed" in result.err and "1031" in result.err
        assert len(result.err.strip().splitlines()) == 1
        assert result.out == ""


def test_a_store_that_cannot_be_opened_is_exit_3(fdbqueue_db, monkeypatch):
    def broken():
        raise ImproperlyConfigured("FoundationDB's client library is not installed.")

    monkeypatch.setattr(cli_base, "get_database", broken)
    result = run("list")
    assert result.code == 3
    assert "cannot be opened" in result.err and "client library" in result.err


def test_size_limit_errors_are_bad_input(jobs, monkeypatch):
    def too_large(*args, **kwargs):
        raise make_error(2101)

    monkeypatch.setattr(service, "push", too_large)
    result = run("push", "jobs", "1")
    assert result.code == 2 and "too large" in result.err


# --- the registry -------------------------------------------------------------------------------


def test_one_line_in_the_registry_adds_a_subcommand(fdbqueue_db, monkeypatch):
    def handle_hello(ctx, options):
        from django_fdbqueue.cli.output import emit

        emit(ctx, {"hello": options["who"]}, f"Hello, {options['who']}.")

    module = types.ModuleType("fdbqueue_cli_hello")

    def register(subparsers):
        add_subcommand(subparsers, "hello", handle_hello, help="Say hello.").add_argument("who")

    module.register = register
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", (*cli.SUBCOMMAND_MODULES, module.__name__))

    assert ok("hello", "world").out == "Hello, world.\n"
    assert ok("hello", "world", "--json").json() == {"hello": "world"}
    assert ok("list", "--json").json()["queues"] == []  # the others are still there


def test_two_modules_cannot_claim_one_subcommand(monkeypatch):
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", (*cli.SUBCOMMAND_MODULES, "django_fdbqueue.cli.queues"))
    with pytest.raises(ImproperlyConfigured, match="'list'"):
        run("list")


def _leaf_parsers(parser) -> list:
    """The parsers that run a handler: ``parser`` itself, or those of its nested actions."""
    import argparse

    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not nested:
        return [parser]
    return [leaf for action in nested for child in action.choices.values() for leaf in _leaf_parsers(child)]


def _contract_breaches(dotted_paths) -> list[str]:
    """What breaks the contract of a ``django_fdbqueue.cli`` module (docs/explanation/code-map.md), per
    module, or []."""
    import inspect
    from importlib import import_module

    from django.core.management.base import CommandParser

    subparsers = CommandParser(prog="fdbqueue").add_subparsers(dest="subcommand", parser_class=cli_base.UsageParser)
    breaches = []
    for dotted in dotted_paths:
        register = getattr(import_module(dotted), "register", None)
        if not callable(register):
            breaches.append(f"{dotted}: no register(subparsers)")
            continue
        before = set(subparsers.choices)
        register(subparsers)
        added = {name: subparsers.choices[name] for name in subparsers.choices if name not in before}
        breaches += [f"{dotted}: registers no subcommand"] if not added else []
        for parser in added.values():
            for leaf in _leaf_parsers(parser):
                flags = {a.dest: a for a in leaf._actions if "--json" in a.option_strings}
                if "as_json" not in flags or flags["as_json"].const is not True:
                    breaches.append(f"{dotted}: {leaf.prog} has no --json storing as_json")
                handler = leaf.get_default("handler")
                try:
                    inspect.signature(handler).bind(object(), {})
                except (TypeError, ValueError):
                    breaches.append(f"{dotted}: {leaf.prog} has no handler(ctx, options)")
        try:  # through add_subcommand, a name registered again is refused with ImproperlyConfigured
            register(subparsers)
            breaches.append(f"{dotted}: registering its subcommands twice is not refused")
        except ImproperlyConfigured:
            pass
        except Exception as error:  # noqa: BLE001 - argparse's own refusal: not add_subcommand's
            breaches.append(f"{dotted}: not registered through add_subcommand ({error})")
    return breaches


def test_every_registered_module_keeps_the_contract():
    """Each module registers subcommands through add_subcommand: a usage parser, ``--json`` on
    every parser that runs, a ``handler(ctx, options)``, and names nobody may take twice."""
    assert _contract_breaches(cli.SUBCOMMAND_MODULES) == []
    assert len(cli.SUBCOMMAND_MODULES) == len(set(cli.SUBCOMMAND_MODULES))


def test_the_contract_check_finds_a_module_that_breaks_it(monkeypatch):
    """A module adding its parser by hand, without --json, with a handler of the wrong shape."""
    import sys

    broken = types.ModuleType("tests.broken_subcommands")
    broken.register = lambda subparsers: subparsers.add_parser("broken").set_defaults(handler=lambda: None)
    monkeypatch.setitem(sys.modules, broken.__name__, broken)
    breaches = _contract_breaches([broken.__name__])
    assert breaches[:2] == [
        f"{broken.__name__}: fdbqueue broken has no --json storing as_json",
        f"{broken.__name__}: fdbqueue broken has no handler(ctx, options)",
    ]
    assert len(breaches) == 3 and "not registered through add_subcommand" in breaches[2], breaches


# --- through manage.py, in a real process -------------------------------------------------------


@pytest.fixture
def manage(tmp_path):
    """Run ``python -m django fdbqueue ...`` in a child process on a store of its own."""
    settings_dir = tmp_path / "settings"
    settings_dir.mkdir()
    (settings_dir / "cli_test_settings.py").write_text(
        textwrap.dedent(
            f"""
            from tests.settings import *  # noqa: F401,F403

            FDBQUEUE = {{"ENGINE": "embedded", "PATH": {str(tmp_path / "store.sqlite3")!r}}}
            """
        ),
        encoding="utf-8",
    )
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "cli_test_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(settings_dir), str(REPO_ROOT), env.get("PYTHONPATH", "")])

    def manage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "django", "fdbqueue", *args],
            input=stdin,
            stdin=subprocess.DEVNULL if stdin is None else None,
            capture_output=True,
            text=True,
            env=env,
            cwd=str(tmp_path),
            timeout=60,
        )

    return manage


def test_exit_codes_and_messages_from_a_shell(manage):
    assert manage("create", "jobs", "--kind", "priority").returncode == 0
    pushed = manage("push", "jobs", "--file", "-", "--priority", "4", stdin='{"a": 1}\n"b"\n')
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout == "Pushed 2 items to queue 'jobs'.\n"

    popped = manage("pop", "jobs", "-n", "5", "--json")
    assert popped.returncode == 0
    assert [i["value"] for i in json.loads(popped.stdout)] == [{"a": 1}, "b"]

    for args, code, message in (
        (("pop", "jobs"), 1, "CommandError: Queue 'jobs' is empty."),
        (("stats", "nope"), 2, "CommandError: No queue is named 'nope'."),
        (("push", "jobs", "not json"), 2, "CommandError: VALUE is not valid JSON"),
        (("delete", "jobs"), 2, "standard input is not a terminal. Pass --yes to confirm."),
        (("clear", "jobs"), 2, "standard input is not a terminal. Pass --yes to confirm."),
    ):
        result = manage(*args)
        assert result.returncode == code, (args, result.stderr)
        assert result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert message in result.stderr
        assert "Traceback" not in result.stderr

    usage = manage("create", "x", "--kind", "lifo")
    assert usage.returncode == 2 and "invalid choice" in usage.stderr and "Traceback" not in usage.stderr
    assert manage("delete", "jobs", "--yes").returncode == 0


def test_help_lists_every_subcommand(manage):
    result = manage("--help")
    assert result.returncode == 0
    for name in ("list", "create", "stats", "push", "pop", "peek", "browse", "clear", "delete"):
        assert f"    {name} " in result.stdout
