"""The admin pages of reliable consumption: lease and delay statistics, the leased/delayed and
dead-letter tabs, requeueing and deleting dead letters, the attempt limit, delayed and
deduplicated pushes.

As in ``test_admin.py``, the store is set up and checked through the service, so each test states
what the page did to the store and not only what it printed.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from django.test import Client
from django.urls import reverse

from django_fdbqueue import service
from django_fdbqueue.admin import queues as queue_pages
from django_fdbqueue.fdbapi import make_error

from .admin_helpers import PERMS, make_user, text, url
from .admin_helpers import client_for, op, operator  # noqa: F401 - fixtures, found by name

pytestmark = pytest.mark.django_db


# -- helpers (those shared with test_admin.py are in admin_helpers.py) --------------------------


def messages_of(page: str) -> list[tuple[str, str]]:
    """The admin's message list as (level, text) pairs."""
    found = re.findall(
        r'<li class="(\w+)">(.*?)</li>', page.split('class="messagelist"', 1)[-1].split("</ul>", 1)[0], re.S
    )
    return [(level, body.strip()) for level, body in found]


def dead_ids(db, name: str = "jobs") -> list[str]:
    return [letter.item.id for letter in service.dead_letters(db, name, limit=100).items]


def state(db, name: str = "jobs") -> tuple:
    """Everything the new actions could change, to compare before and after."""
    info = service.get_queue(db, name)
    ready = [(item.value, item.attempts) for item in service.browse(db, name, limit=100).items]
    return (info.size, info.leased, info.delayed, info.dead, info.max_attempts, info.pushed, ready, dead_ids(db, name))


def kill(db, name: str, value, priority: int = 0) -> str:
    """Push `value` and claim it until it dies; the queue must have nothing else visible."""
    service.push(db, name, value, priority)
    for _ in range(1000):
        lease = service.claim(db, name, lease=600)
        assert lease is not None and lease.item.value == value
        if service.release(db, lease.receipt) == "dead":
            return lease.item.id
    raise AssertionError("the item never died")


@pytest.fixture
def jobs(fdbqueue_db):
    """A priority queue allowing one attempt: two dead letters, one leased, one delayed, one ready item."""
    service.create_queue(fdbqueue_db, "jobs", "priority", max_attempts=1)
    first = kill(fdbqueue_db, "jobs", "dead-a", 1)
    second = kill(fdbqueue_db, "jobs", "dead-b", 2)
    service.push(fdbqueue_db, "jobs", {"task": "leased"}, 4)
    lease = service.claim(fdbqueue_db, "jobs", lease=600)
    assert lease is not None and lease.item.value == {"task": "leased"}
    service.push(fdbqueue_db, "jobs", {"task": "later"}, 5, delay=3600)
    service.push(fdbqueue_db, "jobs", {"task": "ready"}, 6)
    info = service.get_queue(fdbqueue_db, "jobs")
    assert (info.size, info.leased, info.delayed, info.dead, info.max_attempts) == (1, 1, 1, 2, 1)
    return SimpleNamespace(db=fdbqueue_db, dead=[first, second], lease=lease)


# -- who gets in ------------------------------------------------------------------------------------

NEW_PAGES = [
    ("GET", "change", {"view": "scheduled"}),
    ("GET", "change", {"view": "dead"}),
    ("POST", "max_attempts", {"max_attempts": "7"}),
    ("POST", "dead_requeue", {}),
    ("GET", "dead_delete", {}),
    ("POST", "dead_delete", {"confirm": "True"}),
    ("POST", "push", {"value": '"x"', "priority": "1", "delay": "60", "dedup_key": "k"}),
]


def call(client: Client, jobs, method: str, view: str, data: dict):
    args = ("jobs", jobs.dead[0]) if view.startswith("dead_") else ("jobs",)
    if method == "GET":
        return client.get(url(view, *args), data)
    return client.post(url(view, *args), data)


@pytest.mark.parametrize(("method", "view", "data"), NEW_PAGES)
def test_anonymous_users_are_sent_to_the_admin_login(client, jobs, method, view, data):
    before = state(jobs.db)
    response = call(client, jobs, method, view, data)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login") + "?next=")
    assert state(jobs.db) == before


@pytest.mark.parametrize(("method", "view", "data"), NEW_PAGES)
def test_non_staff_users_are_refused(client_for, django_user_model, jobs, method, view, data):
    client = client_for(make_user(django_user_model, "member", staff=False, perms=PERMS))
    before = state(jobs.db)
    response = call(client, jobs, method, view, data)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert state(jobs.db) == before


@pytest.mark.parametrize(("method", "view", "data"), NEW_PAGES)
def test_staff_without_the_queue_permissions_are_refused(client_for, django_user_model, jobs, method, view, data):
    client = client_for(make_user(django_user_model, "clerk"))
    before = state(jobs.db)
    assert call(client, jobs, method, view, data).status_code == 404  # a queue they may not see
    assert state(jobs.db) == before


@pytest.mark.parametrize(
    ("perms", "expected"),
    [
        # The tabs, max attempts, requeue, delete page, delete, push: 200 = shown, 302 = done.
        (["view_queue"], [200, 200, 403, 403, 403, 403, 403]),
        # requeue puts the dead letter back: its delete page then leads back to the tab (302)
        (["view_queue", "manage_queue"], [200, 200, 302, 302, 302, 302, 403]),
        (["view_queue", "push_queue"], [200, 200, 403, 403, 403, 403, 302]),
        (["view_queue", "delete_queue"], [200, 200, 403, 403, 403, 403, 403]),
    ],
)
def test_each_action_needs_its_model_permission(client_for, django_user_model, jobs, perms, expected):
    client = client_for(make_user(django_user_model, "someone", perms=perms))
    got = []
    for method, view, data in NEW_PAGES:
        before = state(jobs.db)
        response = call(client, jobs, method, view, data)
        got.append(response.status_code)
        if response.status_code == 403:
            assert state(jobs.db) == before, view
    assert got == expected


def test_a_read_only_user_sees_no_forms_that_would_refuse_them(client_for, django_user_model, jobs):
    client = client_for(make_user(django_user_model, "viewer", perms=["view_queue"]))
    page = text(client.get(url("change", "jobs")))
    assert 'id="max-attempts-form"' not in page and url("max_attempts", "jobs") not in page
    assert '<td id="stat-dead">2</td>' in page
    page = text(client.get(url("change", "jobs"), {"view": "dead"}))
    assert page.count('class="fdbqueue-dead"') == 2
    assert "/requeue/" not in page and "/dead/" + jobs.dead[0] + "/delete/" not in page


def test_the_dead_letter_requeue_and_delete_need_manage(client_for, django_user_model, jobs):
    page = text(
        client_for(make_user(django_user_model, "manager", perms=["view_queue", "manage_queue"])).get(
            url("change", "jobs"), {"view": "dead"}
        )
    )
    assert url("dead_requeue", "jobs", jobs.dead[0]) in page
    assert url("dead_delete", "jobs", jobs.dead[0]) in page
    page = text(
        client_for(make_user(django_user_model, "deleter", perms=["view_queue", "delete_queue"])).get(
            url("change", "jobs"), {"view": "dead"}
        )
    )
    assert url("dead_requeue", "jobs", jobs.dead[0]) not in page
    assert url("dead_delete", "jobs", jobs.dead[0]) not in page


def test_posts_without_the_csrf_token_are_rejected(operator, jobs):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    before = state(jobs.db)
    for method, view, data in NEW_PAGES:
        if method == "POST":
            assert call(client, jobs, method, view, data).status_code == 403, view
    assert client.post(url("add"), {"name": "new-queue", "kind": "fifo", "max_attempts": "3"}).status_code == 403
    assert state(jobs.db) == before
    assert not service.queue_exists(jobs.db, "new-queue")

    # With the token from the page, the same requeue goes through.
    page = text(client.get(url("change", "jobs"), {"view": "dead"}))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(url("dead_requeue", "jobs", jobs.dead[0]), {"csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert dead_ids(jobs.db) == [jobs.dead[1]]


def test_every_form_on_the_tabs_carries_the_csrf_token(op, jobs):
    for view in ("items", "scheduled", "dead"):
        page = text(op.get(url("change", "jobs"), {"view": view}))
        forms = re.findall(r'<form method="post".*?</form>', page, re.S)
        assert forms, view
        for form in forms:
            assert 'name="csrfmiddlewaretoken"' in form, form[:200]


# -- statistics -----------------------------------------------------------------------------------


def test_the_list_shows_the_new_statistics(op, jobs):
    service.create_queue(jobs.db, "mail", "fifo")
    page = text(op.get(url("changelist")))
    for name, cells in (("jobs", ["1", "1", "2", "1"]), ("mail", ["0", "0", "0", "—"])):
        row = re.search(
            rf'<tr>\s*<th scope="row" class="field-name"><a href="[^"]*/{name}/change/">{name}</a>.*?</tr>', page, re.S
        )
        assert row, page
        got = [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(
                r'<td class="fdbqueue-num field-(?:leased|delayed|dead|max-attempts)">(.*?)</td>', row.group(0), re.S
            )
        ]
        assert got == cells, name
    # The dead-letter count leads to that queue's dead letters.
    assert url("change", "jobs") + "?view=dead" in page


def test_the_queue_page_shows_the_new_statistics_and_tabs(op, jobs):
    page = text(op.get(url("change", "jobs")))
    assert '<td id="stat-size">1</td>' in page
    assert '<td id="stat-leased">1</td>' in page
    assert '<td id="stat-delayed">1</td>' in page
    assert '<td id="stat-dead">2</td>' in page
    assert '<td id="stat-max-attempts">1</td>' in page
    assert "Leased and delayed (2)" in page and "Dead letters (2)" in page
    assert 'aria-current="page">Ready items (1)' in page
    # Ready items keep showing as before, now with their attempts.
    assert re.findall(r'<td class="fdbqueue-num field-priority">(-?\d+)</td>', page) == ["6"]
    assert '<td class="fdbqueue-num field-attempts">0</td>' in page

    service.set_max_attempts(jobs.db, "jobs", None)
    page = text(op.get(url("change", "jobs")))
    assert '<td id="stat-max-attempts">unlimited</td>' in page


def test_the_items_tab_shows_how_often_an_item_was_claimed(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "retry", "fifo", max_attempts=5)
    service.enqueue(fdbqueue_db, "retry", "flaky")
    for _ in range(2):
        lease = service.claim(fdbqueue_db, "retry", lease=600)
        assert service.release(fdbqueue_db, lease.receipt) == "ready"
    page = text(op.get(url("change", "retry")))
    assert re.findall(r'<td class="fdbqueue-num field-attempts">(\d+)</td>', page) == ["2"]
    assert '<td id="stat-max-attempts">5</td>' in page


# -- the leased and delayed tab --------------------------------------------------------------------


def test_the_scheduled_tab_lists_leased_and_delayed_items(op, jobs):
    page = text(op.get(url("change", "jobs"), {"view": "scheduled"}))
    rows = re.findall(r'<tr class="fdbqueue-scheduled fdbqueue-state-(\w+)">(.*?)</tr>', page, re.S)
    # By the time they become visible: the 10-minute lease before the 1-hour delay.
    assert [state_ for state_, _ in rows] == ["leased", "delayed"]
    leased, delayed = (row for _, row in rows)
    assert "&quot;leased&quot;" in leased and "lease ends in" in leased
    assert re.search(r'field-attempts">1<', leased)
    assert "&quot;later&quot;" in delayed and "delayed, visible in" in delayed
    assert re.search(r'field-attempts">0<', delayed)
    expiry = jobs.lease.lease_expires_at.strftime("%Y-%m-%d %H:%M:%S")
    assert expiry in leased
    assert 'aria-current="page">Leased and delayed (2)' in page
    # The ready items are not on this tab.
    assert "&quot;ready&quot;" not in page


def test_the_dead_letter_tab_lists_them_in_queue_order(op, jobs):
    page = text(op.get(url("change", "jobs"), {"view": "dead"}))
    rows = re.findall(r'<tr class="fdbqueue-dead" data-item-id="([^"]+)">(.*?)</tr>', page, re.S)
    assert [item_id for item_id, _ in rows] == jobs.dead
    for (item_id, row), value in zip(rows, ("dead-a", "dead-b")):
        assert f"&quot;{value}&quot;" in row
        assert re.search(r'field-attempts">1<', row)
        assert re.search(r'field-died-at"><span title="\d{4}-\d\d-\d\dT', row)
        assert url("dead_requeue", "jobs", item_id) in row
        assert url("dead_delete", "jobs", item_id) in row
    assert "2 dead letters on this page" in page


@pytest.mark.parametrize("view", ["scheduled", "dead"])
def test_the_tabs_page_by_cursor(op, jobs, monkeypatch, view):
    monkeypatch.setattr(queue_pages, "ITEMS_PER_PAGE", 1)
    row = r'data-item-id="([^"]+)"' if view == "dead" else r'fdbqueue-state-(\w+)"'
    seen, address, pages = [], url("change", "jobs") + f"?view={view}", 0
    while address:
        page = text(op.get(address))
        seen += re.findall(row, page)
        following = re.search(r'<a href="([^"]+)" class="fdbqueue-page" rel="next">', page)
        address = following.group(1).replace("&amp;", "&") if following else None
        if address:
            assert f"view={view}" in address
        pages += 1
        assert pages <= 3
    assert seen == (jobs.dead if view == "dead" else ["leased", "delayed"])


@pytest.mark.parametrize("view", ["scheduled", "dead"])
def test_an_unknown_tab_cursor_falls_back_to_the_first_page(op, jobs, view):
    response = op.get(url("change", "jobs"), {"view": view, "cursor": "not-a-cursor"})
    assert response.status_code == 200
    assert "That page link has expired" in text(response)


def test_an_unknown_tab_shows_the_ready_items(op, jobs):
    response = op.get(url("change", "jobs"), {"view": "everything"})
    assert response.status_code == 200
    assert 'aria-current="page">Ready items (1)' in text(response)


def test_a_script_value_is_escaped_on_the_new_tabs(op, fdbqueue_db):
    hostile = "<script>document.title='pwned'</script>"
    service.create_queue(fdbqueue_db, "evil", "fifo", max_attempts=1)
    kill(fdbqueue_db, "evil", {"html": hostile})
    service.push(fdbqueue_db, "evil", hostile, delay=600)
    for view in ("scheduled", "dead"):
        page = text(op.get(url("change", "evil"), {"view": view}))
        assert "<script>document.title" not in page, view
        assert "&lt;script&gt;" in page, view
    page = text(op.post(url("dead_requeue", "evil", dead_ids(fdbqueue_db, "evil")[0]), follow=True))
    assert "<script>document.title" not in page


# -- requeueing and deleting dead letters -------------------------------------------------------------


def test_requeueing_a_dead_letter(op, jobs):
    response = op.post(url("dead_requeue", "jobs", jobs.dead[0]))
    assert response.status_code == 302
    assert response["Location"] == url("change", "jobs") + "?view=dead"
    page = text(op.get(response["Location"]))
    assert (
        "success",
        f"Requeued the dead letter &quot;dead-a&quot; (item {jobs.dead[0]}) in “jobs”: "
        "it is ready again, with no attempts counted.",
    ) in messages_of(page)
    assert dead_ids(jobs.db) == [jobs.dead[1]]
    # Back at its old place in queue order, attempts reset.
    ready = service.browse(jobs.db, "jobs", limit=10).items
    assert [(item.value, item.attempts) for item in ready] == [("dead-a", 0), ({"task": "ready"}, 0)]
    assert ready[0].id == jobs.dead[0]
    info = service.get_queue(jobs.db, "jobs")
    assert (info.size, info.dead, info.leased, info.delayed) == (2, 1, 1, 1)
    assert 'data-item-id="' + jobs.dead[0] not in page


@pytest.mark.parametrize("item_id", ["not-an-id", "AAAA", "x" * 300])
def test_requeueing_a_bad_item_id_shows_an_error_and_changes_nothing(op, jobs, item_id):
    before = state(jobs.db)
    response = op.post(url("dead_requeue", "jobs", item_id), follow=True)
    assert response.status_code == 200
    levels = [level for level, _ in messages_of(text(response))]
    assert levels == ["error"], messages_of(text(response))
    assert "Nothing was changed" in text(response) or "nothing was changed" in text(response)
    assert state(jobs.db) == before


def test_requeueing_twice_answers_as_the_first_and_deleting_then_says_the_dead_letter_is_gone(op, jobs):
    first = messages_of(text(op.post(url("dead_requeue", "jobs", jobs.dead[0]), follow=True)))
    before = state(jobs.db)
    again = messages_of(text(op.post(url("dead_requeue", "jobs", jobs.dead[0]), follow=True)))
    assert again == first and again[0][0] == "success"  # a double submit, say: the same answer
    page = text(op.post(url("dead_delete", "jobs", jobs.dead[0]), follow=True))
    assert (
        "error",
        f"There is no dead letter {jobs.dead[0]} in this queue (it may have been requeued or "
        "deleted already); nothing was changed.",
    ) in messages_of(page)
    assert state(jobs.db) == before


def test_a_ready_item_is_not_a_dead_letter(op, jobs):
    ready_id = service.browse(jobs.db, "jobs").items[0].id
    before = state(jobs.db)
    for view in ("dead_requeue", "dead_delete"):
        page = text(op.post(url(view, "jobs", ready_id), {"confirm": "True"}, follow=True))
        assert [level for level, _ in messages_of(page)] == ["error"], view
    assert state(jobs.db) == before


def test_deleting_a_dead_letter_asks_for_confirmation_first(op, jobs):
    page = text(op.get(url("dead_delete", "jobs", jobs.dead[1])))
    assert "Are you sure you want to delete the dead letter" in page and jobs.dead[1] in page
    assert "dead-b" in page and "claimed 1 time " in page  # what is about to go, shown first
    assert f'href="{url("change", "jobs")}?view=dead"' in page  # "No, take me back"
    assert dead_ids(jobs.db) == jobs.dead
    # A POST without the confirmation field only asks again.
    response = op.post(url("dead_delete", "jobs", jobs.dead[1]))
    assert response.status_code == 200 and "Are you sure" in text(response)
    assert dead_ids(jobs.db) == jobs.dead

    before = state(jobs.db)
    response = op.post(url("dead_delete", "jobs", jobs.dead[1]), {"confirm": "True"})
    assert response.status_code == 302
    assert response["Location"] == url("change", "jobs") + "?view=dead"
    assert ("success", f"Deleted the dead letter {jobs.dead[1]} of “jobs”.") in messages_of(
        text(op.get(response["Location"]))
    )
    assert dead_ids(jobs.db) == [jobs.dead[0]]
    after = state(jobs.db)
    # Only the dead letter went: nothing came back among the ready items.
    assert after[:3] == before[:3] and after[3] == 1 and after[6] == before[6]


def test_the_confirmation_of_a_dead_letter_already_gone_sends_back_with_an_error(op, jobs):
    service.delete_dead_letter(jobs.db, "jobs", jobs.dead[1])
    response = op.get(url("dead_delete", "jobs", jobs.dead[1]))
    assert response.status_code == 302 and response["Location"] == url("change", "jobs") + "?view=dead"
    assert any(level == "error" for level, _text in messages_of(text(op.get(response["Location"]))))
    assert dead_ids(jobs.db) == [jobs.dead[0]]


@pytest.mark.parametrize("item_id", ["not-an-id", "AAAA"])
def test_deleting_a_bad_item_id_shows_an_error_and_changes_nothing(op, jobs, item_id):
    before = state(jobs.db)
    response = op.post(url("dead_delete", "jobs", item_id), {"confirm": "True"}, follow=True)
    assert response.status_code == 200
    assert [level for level, _ in messages_of(text(response))] == ["error"]
    assert state(jobs.db) == before


def test_getting_an_action_address_changes_nothing(op, jobs):
    before = state(jobs.db)
    response = op.get(url("dead_requeue", "jobs", jobs.dead[0]))
    assert response.status_code == 302 and response["Location"] == url("change", "jobs") + "?view=dead"
    response = op.get(url("max_attempts", "jobs"), {"max_attempts": "9"})
    assert response.status_code == 302 and response["Location"] == url("change", "jobs")
    assert state(jobs.db) == before


def test_a_missing_queue_is_a_404(op, jobs):
    fdbqueue_db = jobs.db
    for item_id in ("AAAA", jobs.dead[0]):  # a bad id, and a dead letter's id of another queue
        assert op.post(url("dead_requeue", "nope", item_id)).status_code == 404
        assert op.post(url("dead_delete", "nope", item_id), {"confirm": "True"}).status_code == 404
    assert dead_ids(fdbqueue_db) == jobs.dead
    assert op.get(url("change", "nope"), {"view": "dead"}).status_code == 404
    assert op.get(url("change", "nope"), {"view": "scheduled"}).status_code == 404
    assert op.post(url("max_attempts", "nope"), {"max_attempts": "3"}).status_code == 404
    assert op.post(url("dead_requeue", "nope", "AAAA")).status_code == 404
    assert op.get(url("dead_delete", "nope", "AAAA")).status_code == 404
    assert op.post(url("dead_delete", "nope", "AAAA"), {"confirm": "True"}).status_code == 404
    assert not service.queue_exists(fdbqueue_db, "nope")


def test_a_store_failure_during_requeue_is_a_clear_page(op, jobs, monkeypatch):
    def timed_out(*args, **kwargs):
        raise make_error(1031)

    monkeypatch.setattr(service, "requeue_dead_letter", timed_out)
    response = op.post(url("dead_requeue", "jobs", jobs.dead[0]))
    assert response.status_code == 503
    assert "may or may not have taken effect" in text(response)


# -- the attempt limit ------------------------------------------------------------------------------


@pytest.mark.parametrize(("posted", "expected"), [("5", 5), ("", None), ("1000", 1000), ("1", 1)])
def test_creating_a_queue_with_an_attempt_limit(op, fdbqueue_db, posted, expected):
    response = op.post(url("add"), {"name": "orders", "kind": "fifo", "max_attempts": posted})
    assert response.status_code == 302
    assert service.get_queue(fdbqueue_db, "orders").max_attempts == expected
    page = text(op.get(response["Location"]))
    assert "The fifo queue “orders” was created" in page


def test_the_create_forms_offer_the_attempt_limit(op, fdbqueue_db):
    for address in (url("add"), url("changelist")):
        assert 'name="max_attempts"' in text(op.get(address))


@pytest.mark.parametrize(
    ("posted", "message"),
    [
        ("0", "greater than or equal to 1"),
        ("1001", "less than or equal to 1000"),
        ("-3", "greater than or equal to 1"),
        ("many", "Enter a whole number."),
        ("2.5", "Enter a whole number."),
    ],
)
def test_a_bad_attempt_limit_on_create_creates_nothing(op, fdbqueue_db, posted, message):
    response = op.post(url("add"), {"name": "orders", "kind": "fifo", "max_attempts": posted})
    assert response.status_code == 200
    assert message in text(response) and 'class="errornote"' in text(response)
    assert not service.queue_exists(fdbqueue_db, "orders")


@pytest.mark.parametrize(
    ("posted", "expected", "said"),
    [
        ("3", 3, "now allows at most 3 attempts per item"),
        ("1", 1, "now allows at most 1 attempt per item"),
        ("", None, "now allows unlimited attempts per item"),
    ],
)
def test_changing_the_attempt_limit(op, jobs, posted, expected, said):
    before = state(jobs.db)
    response = op.post(url("max_attempts", "jobs"), {"max_attempts": posted})
    assert response.status_code == 302 and response["Location"] == url("change", "jobs")
    assert service.get_queue(jobs.db, "jobs").max_attempts == expected
    page = text(op.get(response["Location"]))
    assert said in page
    assert f'name="max_attempts" value="{posted}"' in page if posted else 'name="max_attempts"' in page
    # Nothing else changed.
    after = state(jobs.db)
    assert after[:4] == before[:4] and after[5:] == before[5:]


@pytest.mark.parametrize(
    ("posted", "message"),
    [
        ("0", "greater than or equal to 1"),
        ("1001", "less than or equal to 1000"),
        ("lots", "Enter a whole number."),
        ("1e3", "Enter a whole number."),
    ],
)
def test_a_bad_attempt_limit_shows_the_error_and_changes_nothing(op, jobs, posted, message):
    before = state(jobs.db)
    response = op.post(url("max_attempts", "jobs"), {"max_attempts": posted})
    assert response.status_code == 200
    page = text(response)
    form = re.search(r'<form method="post" action="[^"]*" id="max-attempts-form".*?</form>', page, re.S)
    assert form and message in form.group(0)
    assert "the limit was not changed" in form.group(0)
    assert f'value="{posted}"' in form.group(0)
    assert state(jobs.db) == before


# -- delayed and deduplicated pushes -------------------------------------------------------------------


def test_a_delayed_push(op, jobs):
    before = service.get_queue(jobs.db, "jobs")
    response = op.post(url("push", "jobs"), {"value": '{"task": "soon"}', "priority": "3", "delay": "120"})
    assert response.status_code == 302
    page = text(op.get(response["Location"]))
    assert "with priority 3 to “jobs”, delayed by 2 min." in page
    after = service.get_queue(jobs.db, "jobs")
    assert (after.size, after.delayed, after.pushed) == (before.size, before.delayed + 1, before.pushed + 1)
    soon = [entry for entry in service.scheduled(jobs.db, "jobs").items if entry.item.value == {"task": "soon"}]
    assert len(soon) == 1 and soon[0].state == "delayed"
    seconds = (soon[0].visible_at - soon[0].item.enqueued_at).total_seconds()
    assert 110 <= seconds <= 130


def test_a_fractional_delay_and_a_zero_delay(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "mail", "fifo")
    assert op.post(url("push", "mail"), {"value": '"now"', "delay": "0"}).status_code == 302
    assert op.post(url("push", "mail"), {"value": '"later"', "delay": "90.5"}).status_code == 302
    info = service.get_queue(fdbqueue_db, "mail")
    assert (info.size, info.delayed) == (1, 1)
    assert [item.value for item in service.browse(fdbqueue_db, "mail").items] == ["now"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"delay": "-1"}, "greater than or equal to 0"),
        ({"delay": "soon"}, "Enter a number."),
        ({"delay": "nan"}, "Enter a number."),
        ({"delay": "inf"}, "Enter a number."),
        ({"delay": str(366 * 86400 + 1)}, "less than or equal to"),
        ({"dedup_key": "k" * 201}, "at most 200 characters"),
    ],
)
def test_bad_delay_or_dedup_key_shows_the_error_and_pushes_nothing(op, jobs, data, message):
    before = state(jobs.db)
    response = op.post(url("push", "jobs"), {"value": '"x"', "priority": "1", **data})
    assert response.status_code == 200
    page = text(response)
    form = re.search(r'<form method="post" action="[^"]*" id="push-form".*?</form>', page, re.S)
    assert form and message in form.group(0)
    assert "nothing was pushed" in form.group(0)
    assert state(jobs.db) == before


def test_a_duplicate_push_says_the_item_already_existed(op, jobs):
    first = op.post(url("push", "jobs"), {"value": '"invoice"', "priority": "2", "dedup_key": "invoice-17"})
    assert first.status_code == 302
    assert "Pushed &quot;invoice&quot; with priority 2" in text(op.get(first["Location"]))
    before = state(jobs.db)
    original = [item for item in service.browse(jobs.db, "jobs").items if item.value == "invoice"]
    assert len(original) == 1

    second = op.post(url("push", "jobs"), {"value": '"invoice again"', "priority": "9", "dedup_key": "invoice-17"})
    assert second.status_code == 302
    page = text(op.get(second["Location"]))
    assert (
        "warning",
        f"An item with the dedup key “invoice-17” already existed in “jobs” (item {original[0].id}), "
        "so nothing was pushed.",
    ) in messages_of(page)
    assert state(jobs.db) == before

    # Another key is another item.
    op.post(url("push", "jobs"), {"value": '"invoice"', "priority": "2", "dedup_key": "invoice-18"})
    assert service.get_queue(jobs.db, "jobs").size == before[0] + 1


def test_a_duplicate_of_a_delayed_push_is_also_refused(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "mail", "fifo")
    data = {"value": '"hello"', "delay": "600", "dedup_key": "welcome-ada"}
    op.post(url("push", "mail"), data)
    page = text(op.post(url("push", "mail"), data, follow=True))
    assert "already existed" in page
    info = service.get_queue(fdbqueue_db, "mail")
    assert (info.size, info.delayed, info.pushed) == (0, 1, 1)


def test_the_push_form_offers_delay_and_dedup_key(op, jobs):
    page = text(op.get(url("change", "jobs")))
    form = re.search(r'<form method="post" action="[^"]*" id="push-form".*?</form>', page, re.S).group(0)
    assert 'name="delay"' in form and 'name="dedup_key"' in form


def test_a_service_refusal_lands_on_the_field_it_names(op, jobs, monkeypatch):
    """Arguments the form let through but the service refused: the error sits on that field."""
    from django_fdbqueue import exceptions

    def refuse(*args, **kwargs):
        raise exceptions.InvalidArgument("dedup_key must be a string of 1 to 200 characters.", field="dedup_key")

    monkeypatch.setattr(service, "push", refuse)
    before = state(jobs.db)
    page = text(op.post(url("push", "jobs"), {"value": '"x"', "priority": "1", "dedup_key": "k"}))
    row = re.search(r'<div class="form-row errors field-dedup_key">.*?</div>', page, re.S)
    assert row and "dedup_key must be a string" in row.group(0)
    assert state(jobs.db) == before
