"""The admin's queue pages through Django's test client: access rules, every action, bad input.

Queues are set up and checked through the service directly, so each test states what the page
did to the store, not only what it printed.
"""

from __future__ import annotations

import base64
import re

import pytest
from django.test import Client
from django.urls import reverse

from django_fdbqueue import codecs, service
from django_fdbqueue.admin import queues as queue_pages
from django_fdbqueue.fdbapi import make_error

from .admin_helpers import PERMS, make_user, text, url
from .admin_helpers import client_for, op, operator  # noqa: F401 - fixtures, found by name

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(fdbqueue_db):
    """A priority queue holding three items of different priorities."""
    service.create_queue(fdbqueue_db, "jobs", "priority")
    for value, priority in (({"task": "mid"}, 5), ({"task": "low"}, -3), ({"task": "high"}, 40)):
        service.push(fdbqueue_db, "jobs", value, priority)
    return fdbqueue_db


def values(db, name: str, end: str = "min") -> list:
    return [item.value for item in service.browse(db, name, end=end, limit=100).items]


ALL_PAGES = [
    ("GET", "changelist", None),
    ("GET", "add", None),
    ("POST", "add", None),
    ("GET", "change", "jobs"),
    ("POST", "push", "jobs"),
    ("POST", "pop", "jobs"),
    ("POST", "peek", "jobs"),
    ("GET", "clear", "jobs"),
    ("POST", "clear", "jobs"),
    ("GET", "delete", "jobs"),
    ("POST", "delete", "jobs"),
]
MUTATING_POSTS = {
    "add": {"name": "new-queue", "kind": "fifo"},
    "push": {"value": '"x"', "priority": "1"},
    "pop": {"end": "min"},
    "peek": {"end": "min"},
    "clear": {"confirm": "True"},
    "delete": {"confirm": "True"},
}


def call(client: Client, method: str, view: str, name: str | None):
    address = url(view, name)
    if method == "GET":
        return client.get(address)
    return client.post(address, MUTATING_POSTS[view])


# -- who gets in ------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "view", "name"), ALL_PAGES)
def test_anonymous_users_are_sent_to_the_admin_login(client, jobs, method, view, name):
    response = call(client, method, view, name)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login") + "?next=")
    assert values(jobs, "jobs") == [{"task": "low"}, {"task": "mid"}, {"task": "high"}]


@pytest.mark.parametrize(("method", "view", "name"), ALL_PAGES)
def test_non_staff_users_are_refused(client_for, django_user_model, jobs, method, view, name):
    # Even holding every queue permission, a user who is not staff never reaches the pages.
    client = client_for(make_user(django_user_model, "member", staff=False, perms=PERMS))
    response = call(client, method, view, name)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert values(jobs, "jobs") == [{"task": "low"}, {"task": "mid"}, {"task": "high"}]
    assert not service.queue_exists(jobs, "new-queue")


@pytest.mark.parametrize(("method", "view", "name"), ALL_PAGES)
def test_staff_without_the_queue_permissions_are_refused(client_for, django_user_model, jobs, method, view, name):
    # The list and the create form are refused (403); a queue they may not see "does not exist" (404).
    client = client_for(make_user(django_user_model, "clerk"))
    response = call(client, method, view, name)
    assert response.status_code == (403 if name is None else 404)
    assert values(jobs, "jobs") == [{"task": "low"}, {"task": "mid"}, {"task": "high"}]
    assert not service.queue_exists(jobs, "new-queue")


def test_the_admin_index_lists_the_queues_only_for_users_with_the_permission(
    client_for, django_user_model, fdbqueue_db
):
    page = text(client_for(make_user(django_user_model, "viewer", perms=["view_queue"])).get(reverse("admin:index")))
    assert "FDB queues" in page
    assert f'href="{url("changelist")}"' in page

    page = text(client_for(make_user(django_user_model, "clerk")).get(reverse("admin:index")))
    assert "FDB queues" not in page
    assert url("changelist") not in page


@pytest.mark.parametrize(
    ("method", "view", "expected"),
    [
        ("GET", "changelist", 200),
        ("GET", "change", 200),
        ("POST", "peek", 302),
        ("GET", "add", 403),
        ("POST", "push", 403),
        ("POST", "pop", 403),
        ("GET", "clear", 403),
        ("POST", "clear", 403),
        ("POST", "delete", 403),
    ],
)
def test_view_permission_alone_allows_reading_only(client_for, django_user_model, jobs, method, view, expected):
    client = client_for(make_user(django_user_model, "viewer", perms=["view_queue"]))
    response = call(client, method, view, None if view in ("changelist", "add") else "jobs")
    assert response.status_code == expected
    assert values(jobs, "jobs") == [{"task": "low"}, {"task": "mid"}, {"task": "high"}]


def test_a_read_only_user_sees_no_forms_that_would_refuse_them(client_for, django_user_model, jobs):
    client = client_for(make_user(django_user_model, "viewer", perms=["view_queue"]))
    listing = text(client.get(url("changelist")))
    assert 'id="create-queue"' not in listing and url("delete", "jobs") not in listing
    page = text(client.get(url("change", "jobs")))
    assert 'id="push-form"' not in page
    assert url("pop", "jobs") not in page and url("clear", "jobs") not in page
    assert url("peek", "jobs") in page


# -- the queue list ---------------------------------------------------------------------------


def test_the_list_shows_every_statistic(op, jobs):
    service.create_queue(jobs, "mail", "fifo")
    service.pop(jobs, "jobs", end="max")
    page = text(op.get(url("changelist")))
    row = re.search(
        r'<tr>\s*<th scope="row" class="field-name"><a href="[^"]*/jobs/change/">jobs</a>.*?</tr>', page, re.S
    )
    assert row, page
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row.group(0), re.S)]
    # kind, size, lowest to highest priority, oldest age, pushed / popped, ... (one cell each)
    assert cells[:3] == ["priority", "2", "-3 to 5"]
    assert cells[3].endswith(" s") or "min" in cells[3]
    assert cells[4] == "3 / 1"
    assert "mail" in page
    assert "2 queues on this page" in page


def test_the_list_filters_by_name_prefix(op, fdbqueue_db):
    for name in ("billing.in", "billing.out", "mail"):
        service.create_queue(fdbqueue_db, name)
    page = text(op.get(url("changelist"), {"prefix": "billing."}))
    # Names are shown with line-break hints after their dots ("billing.<wbr>in").
    assert ">billing.<wbr>in<" in page and ">billing.<wbr>out<" in page
    assert ">mail<" not in page
    assert 'value="billing."' in page

    page = text(op.get(url("changelist"), {"prefix": "nothing"}))
    assert "No queue name starts with “nothing”." in page


def test_names_break_at_their_dots_and_stay_escaped():
    from django_fdbqueue.templatetags.fdbqueue_admin import breakable

    assert breakable("billing.invoices_eu-1") == "billing.<wbr>invoices_<wbr>eu-1"
    assert breakable("<b>.x") == "&lt;b&gt;.<wbr>x"


def test_the_list_pages_by_cursor(op, fdbqueue_db, monkeypatch):
    monkeypatch.setattr(queue_pages, "QUEUES_PER_PAGE", 2)
    names = [f"q{i}" for i in range(5)]
    for name in names:
        service.create_queue(fdbqueue_db, name)
    seen, address, pages = [], url("changelist"), 0
    while address:
        page = text(op.get(address))
        seen += re.findall(r'class="field-name"><a href="[^"]+">([^<]+)</a>', page)
        following = re.search(r'<a href="([^"]+)" class="fdbqueue-page" rel="next">', page)
        address = following.group(1).replace("&amp;", "&") if following else None
        pages += 1
        assert pages <= 5
    assert seen == names
    assert pages == 3


def test_an_unknown_list_cursor_falls_back_to_the_first_page(op, jobs):
    response = op.get(url("changelist"), {"cursor": "not-a-cursor"})
    assert response.status_code == 200
    assert "That page link has expired" in text(response)
    assert ">jobs<" in text(response)


def test_creating_a_queue(op, fdbqueue_db):
    response = op.post(url("add"), {"name": "orders", "kind": "priority"})
    assert response.status_code == 302
    assert response["Location"] == url("change", "orders")
    assert service.get_queue(fdbqueue_db, "orders").kind == "priority"
    page = text(op.get(response["Location"]))
    assert "The priority queue “orders” was created." in page


def test_the_add_page_is_a_form(op, fdbqueue_db):
    page = text(op.get(url("add")))
    assert 'name="name"' in page and 'name="kind"' in page
    assert 'class="breadcrumbs"' in page


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "has space", "kind": "fifo"}, "Use 1 to 200 letters"),
        ({"name": "", "kind": "fifo"}, "This field is required."),
        ({"name": "x" * 201, "kind": "fifo"}, "at most 200 characters"),
        ({"name": "ok", "kind": "stack"}, "Select a valid choice."),
    ],
)
def test_bad_create_input_re_renders_the_form_and_creates_nothing(op, fdbqueue_db, data, message):
    response = op.post(url("add"), data)
    assert response.status_code == 200
    assert message in text(response)
    assert 'class="errornote"' in text(response)
    assert service.list_queues(fdbqueue_db).items == []


def test_creating_an_existing_queue_is_an_error_not_an_overwrite(op, jobs):
    response = op.post(url("add"), {"name": "jobs", "kind": "fifo"})
    assert response.status_code == 200
    assert 'class="errorlist' in text(response)
    assert service.get_queue(jobs, "jobs").kind == "priority"
    assert service.size(jobs, "jobs") == 3


# -- the queue page ---------------------------------------------------------------------------


def priorities_on(page: str) -> list[int]:
    return [int(p) for p in re.findall(r'<td class="fdbqueue-num field-priority">(-?\d+)</td>', page)]


def test_the_queue_page_shows_stats_and_items_from_either_end(op, jobs):
    page = text(op.get(url("change", "jobs")))
    assert priorities_on(page) == [-3, 5, 40]
    assert '<td id="stat-size">3</td>' in page
    assert '<td id="stat-min">-3</td>' in page and '<td id="stat-max">40</td>' in page
    # Values appear as indented JSON.
    assert "{\n  &quot;task&quot;: &quot;high&quot;\n}" in page
    assert 'class="breadcrumbs"' in page and f'href="{url("changelist")}"' in page

    page = text(op.get(url("change", "jobs"), {"end": "max"}))
    assert priorities_on(page) == [40, 5, -3]
    assert "Items from the max end" in page


def test_items_page_by_cursor_from_each_end(op, jobs, monkeypatch):
    monkeypatch.setattr(queue_pages, "ITEMS_PER_PAGE", 2)
    for end, expected in (("min", [-3, 5, 40]), ("max", [40, 5, -3])):
        seen, address, pages = [], url("change", "jobs") + f"?end={end}", 0
        while address:
            page = text(op.get(address))
            seen += priorities_on(page)
            following = re.search(r'<a href="([^"]+)" class="fdbqueue-page" rel="next">', page)
            address = following.group(1).replace("&amp;", "&") if following else None
            pages += 1
            assert pages <= 3
        assert seen == expected
        assert pages == 2


def test_a_missing_queue_is_a_404(op, fdbqueue_db):
    for method, view in (("GET", "change"), ("POST", "push"), ("POST", "pop"), ("GET", "clear"), ("POST", "delete")):
        response = call(op, method, view, "nope")
        assert response.status_code == 404, view


def test_pushing_an_item(op, jobs):
    response = op.post(url("push", "jobs"), {"value": '{"task": "new", "n": [1, 2]}', "priority": "7"})
    assert response.status_code == 302
    assert service.size(jobs, "jobs") == 4
    assert [i.priority for i in service.browse(jobs, "jobs").items] == [-3, 5, 7, 40]
    page = text(op.get(response["Location"]))
    assert "with priority 7 to “jobs”" in page
    assert 'class="success"' in page


def test_pushing_json_null_is_a_value_not_missing_input(op, jobs):
    response = op.post(url("push", "jobs"), {"value": "null", "priority": "0"})
    assert response.status_code == 302
    assert None in values(jobs, "jobs")


def test_a_fifo_queue_is_pushed_without_a_priority(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "mail", "fifo")
    page = text(op.get(url("change", "mail")))
    assert 'name="priority"' not in page
    assert "Pop max" not in page and "Dequeue" in page
    op.post(url("push", "mail"), {"value": '"first"'})
    op.post(url("push", "mail"), {"value": '"second"'})
    assert values(fdbqueue_db, "mail") == ["first", "second"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"value": "{not json", "priority": "1"}, "Enter valid JSON"),
        ({"value": "", "priority": "1"}, "This field is required."),
        ({"value": "NaN", "priority": "1"}, "NaN is not allowed"),
        ({"value": '"ok"', "priority": "high"}, "Enter a whole number."),
        ({"value": '"ok"', "priority": "1.5"}, "Enter a whole number."),
        ({"value": '"ok"', "priority": str(2**63)}, "less than or equal to"),
        ({"value": '"ok"', "priority": str(-(2**63) - 1)}, "greater than or equal to"),
        ({"value": '"' + "x" * 100_001 + '"', "priority": "1"}, "100,000"),
        ({"value": '"\\ud800"', "priority": "1"}, "not valid Unicode"),
        ({"value": "[" * 300 + "]" * 300, "priority": "1"}, "nested more than 256 levels"),
        ({"value": "[" * 100_000 + "]" * 100_000, "priority": "1"}, "nested too deeply"),
    ],
)
def test_bad_push_input_re_renders_the_form_and_changes_nothing(op, jobs, data, message):
    before = service.get_queue(jobs, "jobs")
    response = op.post(url("push", "jobs"), data)
    assert response.status_code == 200
    page = text(response)
    assert message in page
    assert "nothing was pushed" in page
    # The typed value comes back in the form (escaped), so it can be corrected.
    if len(data["value"]) < 100:
        assert data["value"].replace('"', "&quot;") in page
    after = service.get_queue(jobs, "jobs")
    assert (after.size, after.pushed) == (before.size, before.pushed) == (3, 3)


def test_popping_from_each_end(op, jobs):
    response = op.post(url("pop", "jobs"), {"end": "max"}, follow=True)
    assert "Popped the max end of “jobs”: priority 40" in text(response)
    assert values(jobs, "jobs") == [{"task": "low"}, {"task": "mid"}]
    response = op.post(url("pop", "jobs"), {"end": "min"}, follow=True)
    assert "Popped the min end of “jobs”: priority -3" in text(response)
    assert values(jobs, "jobs") == [{"task": "mid"}]
    assert service.get_queue(jobs, "jobs").popped == 2


def test_popping_an_empty_queue_says_so(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "empty", "priority")
    response = op.post(url("pop", "empty"), {"end": "min"}, follow=True)
    assert "“empty” is empty: nothing to pop." in text(response)


def test_a_bad_end_is_refused_with_a_message(op, jobs):
    response = op.post(url("pop", "jobs"), {"end": "middle"}, follow=True)
    assert "Choose the min end or the max end." in text(response)
    assert service.size(jobs, "jobs") == 3


def test_the_max_end_of_a_fifo_queue_is_refused_with_a_message(op, fdbqueue_db):
    service.create_queue(fdbqueue_db, "mail", "fifo")
    service.enqueue(fdbqueue_db, "mail", "a")
    response = op.post(url("pop", "mail"), {"end": "max"}, follow=True)
    assert response.status_code == 200
    assert 'class="error"' in text(response)
    assert service.size(fdbqueue_db, "mail") == 1


def test_peeking_removes_nothing(op, jobs):
    response = op.post(url("peek", "jobs"), {"end": "max"}, follow=True)
    assert "Peeked at the max end of “jobs”: priority 40" in text(response)
    assert service.size(jobs, "jobs") == 3


def test_getting_an_action_address_changes_nothing(op, jobs):
    for view in ("push", "pop", "peek"):
        response = op.get(url(view, "jobs"))
        assert response.status_code == 302 and response["Location"] == url("change", "jobs")
    assert service.size(jobs, "jobs") == 3


def test_clearing_asks_for_confirmation_first(op, jobs):
    page = text(op.get(url("clear", "jobs")))
    assert "Are you sure you want to clear" in page and "3 items" in page
    assert service.size(jobs, "jobs") == 3
    # A POST without the confirmation field does nothing but show the question again.
    assert op.post(url("clear", "jobs")).status_code == 200
    assert service.size(jobs, "jobs") == 3

    response = op.post(url("clear", "jobs"), {"confirm": "True"}, follow=True)
    assert "Cleared “jobs”: removed 3 items." in text(response)
    assert service.size(jobs, "jobs") == 0
    assert service.queue_exists(jobs, "jobs")


def test_deleting_asks_for_confirmation_first(op, jobs):
    page = text(op.get(url("delete", "jobs")))
    assert "Are you sure you want to delete" in page
    assert service.queue_exists(jobs, "jobs")

    response = op.post(url("delete", "jobs"), {"confirm": "True"})
    assert response.status_code == 302 and response["Location"] == url("changelist")
    assert not service.queue_exists(jobs, "jobs")
    assert "The queue “jobs” was deleted." in text(op.get(response["Location"]))


def test_queues_named_dot_and_dot_dot_stay_reachable(op, fdbqueue_db):
    for name in (".", ".."):
        service.create_queue(fdbqueue_db, name)
        address = url("change", name)
        assert "/./" not in address and "/../" not in address
        assert op.get(address).status_code == 200
        assert op.post(url("push", name), {"value": "1"}).status_code == 302
        assert service.size(fdbqueue_db, name) == 1


# -- forged requests and hostile values ---------------------------------------------------------


def test_posts_without_the_csrf_token_are_rejected(operator, jobs):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    for view, data in MUTATING_POSTS.items():
        name = None if view == "add" else "jobs"
        assert client.post(url(view, name), data).status_code == 403, view
    assert values(jobs, "jobs") == [{"task": "low"}, {"task": "mid"}, {"task": "high"}]
    assert not service.queue_exists(jobs, "new-queue")

    # The same POST with the token from the page goes through.
    page = text(client.get(url("change", "jobs")))
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    response = client.post(url("pop", "jobs"), {"end": "max", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert service.size(jobs, "jobs") == 2


def test_a_script_value_is_escaped_everywhere(op, fdbqueue_db):
    hostile = "<script>document.title='pwned'</script>"
    service.create_queue(fdbqueue_db, "evil", "priority")
    service.push(fdbqueue_db, "evil", {"html": hostile}, 1)
    page = text(op.get(url("change", "evil")))
    assert "<script>document.title" not in page
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in page

    # The peek message repeats the value: escaped there too.
    page = text(op.post(url("peek", "evil"), {"end": "min"}, follow=True))
    assert "<script>document.title" not in page
    assert "&lt;script&gt;" in page


# -- store failures -----------------------------------------------------------------------------


def test_a_store_failure_is_a_clear_page_not_a_server_error(op, jobs, monkeypatch):
    def timed_out(*args, **kwargs):
        raise make_error(1031)

    monkeypatch.setattr(service, "list_queues", timed_out)
    response = op.get(url("changelist"))
    assert response.status_code == 503
    assert "The queue store did not answer" in text(response)
    assert "1031" in text(response)

    monkeypatch.setattr(service, "pop", timed_out)
    response = op.post(url("pop", "jobs"), {"end": "min"})
    assert response.status_code == 503
    assert "may or may not have taken effect" in text(response)


def test_crafted_cursor_tokens_fall_back_instead_of_failing(op, jobs):
    """A token that unpacks into deeply nested tuples is just an unknown cursor."""
    bomb = base64.urlsafe_b64encode(b"\x05" * 1400).rstrip(b"=").decode()
    assert op.get(url("changelist"), {"cursor": bomb}).status_code == 200
    assert op.get(url("change", "jobs"), {"cursor": bomb}).status_code == 200


def test_an_item_this_process_cannot_decode_is_reported_not_a_500(op, jobs):
    """An item stored with a codec this process lacks: a 400 page that says which codec."""

    class Upper(codecs.Codec):
        name = "upper-test"

        def encode(self, value):
            return value.upper().encode()

        def decode(self, data):
            return data.decode()

    service.push(jobs, "jobs", "shout", -100, codec=Upper())
    # As in a process that never registered it. Unregistered for good, not through monkeypatch,
    # whose undo could put it back after the registry's own clean-up and break the next engine's run.
    codecs.unregister("upper-test")
    response = op.get(url("change", "jobs"))
    assert response.status_code == 400
    assert "upper-test" in text(response)
    assert service.size(jobs, "jobs") == 4  # nothing was lost
