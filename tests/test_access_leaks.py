"""What a caller may learn of queues and schedules it may not see, over REST (issue 36).

A list's cursor never names a queue the caller may not view; creating a schedule under the name
of one the caller may not see answers as a refusal does, not "already exists"; the browsable API
draws a viewer's page without the forms it may not use, and counts no refusal for them. Every
test reads the store, so each runs on both engines.
"""

from __future__ import annotations

import base64

import pytest
from rest_framework.test import APIClient

from django_fdbqueue import schedules, service
from django_fdbqueue.access import events
from django_fdbqueue.models import QueueGrant

pytestmark = pytest.mark.django_db


@pytest.fixture
def heard():
    """Every (event, action) the access hook emits meanwhile: refusals and audit records."""
    seen: list[tuple[str, str]] = []

    def listen(event: str, action: str) -> None:
        seen.append((event, action))

    events.add_listener(listen)
    yield seen
    events.remove_listener(listen)


def client_of(django_user_model, username: str, grants: dict[str, str]) -> APIClient:
    """A client of a new user holding ``grants`` (pattern -> actions)."""
    user = django_user_model.objects.create_user(username)
    for pattern, actions in grants.items():
        QueueGrant.objects.create(user=user, pattern=pattern, actions=actions)
    client = APIClient()
    client.force_authenticate(user)
    return client


def readable(cursor: str) -> bytes:
    """The bytes inside a cursor, as anyone can read them (unpadded URL-safe base64)."""
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))


def walk(client: APIClient, limit: int, prefix: str = "") -> tuple[list[str], list[str]]:
    """Every page of the list: (the names shown, the cursors handed out)."""
    names, cursors, cursor = [], [], None
    for _ in range(100):
        query = {"limit": limit, "prefix": prefix, **({"cursor": cursor} if cursor else {})}
        response = client.get("/api/queues/", query)
        assert response.status_code == 200, response.content
        names += [queue["name"] for queue in response.json()["results"]]
        cursor = response.json()["next"] and response.json()["next"].split("cursor=")[1].split("&")[0]
        if not cursor:
            return names, cursors
        cursors.append(cursor)
    raise AssertionError("the list never ended")


# -- list cursors ---------------------------------------------------------------------------------


def test_a_list_cursor_never_names_a_hidden_queue(fdbqueue_db, django_user_model, monkeypatch):
    """``?limit=1`` with a grant on one queue: a page that read its most catalog pages ended on a
    hidden queue, and its cursor was that name, readable in base64 (catalog pages of one queue
    here, so five queues show what a thousand do)."""
    from django_fdbqueue.access import listing

    monkeypatch.setattr(listing, "LIST_READ_SIZE", 1)
    monkeypatch.setattr(listing, "LIST_READS", 2)
    for name in ("a.hidden", "b.shown", "c.hidden-too", "d.secret", "e.hidden"):
        service.create_queue(fdbqueue_db, name, "fifo")
    client = client_of(django_user_model, "narrow", {"b.shown": "view"})
    names, cursors = walk(client, limit=1)
    assert names == ["b.shown"] and cursors
    for cursor in cursors:
        inside = readable(cursor)
        assert b"hidden" not in inside and b"secret" not in inside, inside


def test_a_list_past_a_thousand_hidden_queues_hands_out_no_hidden_name(fdbqueue_db, django_user_model, monkeypatch):
    """Once a page reads its most catalog pages without filling up, its cursor continues after
    the last queue read, which the caller may not see: that cursor is sealed, and it works."""
    from django_fdbqueue.access import listing

    monkeypatch.setattr(listing, "LIST_READ_SIZE", 2)
    monkeypatch.setattr(listing, "LIST_READS", 2)
    hidden = [f"h{n:02d}" for n in range(9)]
    for name in [*hidden, "z.shown"]:
        service.create_queue(fdbqueue_db, name, "fifo")
    client = client_of(django_user_model, "narrow", {"z.*": "view"})
    names, cursors = walk(client, limit=2)
    assert names == ["z.shown"] and cursors
    for cursor in cursors:
        assert b"h0" not in readable(cursor), readable(cursor)
    tampered = cursors[0][:-2] + ("AA" if not cursors[0].endswith("AA") else "BB")
    response = client.get("/api/queues/", {"limit": 2, "cursor": tampered})
    assert response.status_code == 400 and response.json()["code"] == "invalid_cursor"


def test_a_user_who_sees_every_queue_pages_through_all_of_them(fdbqueue_db, django_user_model):
    for name in ("a", "b", "c"):
        service.create_queue(fdbqueue_db, name, "fifo")
    client = client_of(django_user_model, "wide", {"*": "view"})
    assert walk(client, limit=1)[0] == ["a", "b", "c"]


# -- creating a schedule ----------------------------------------------------------------------------


def test_creating_a_schedule_under_a_hidden_schedule_s_name_does_not_say_it_exists(
    fdbqueue_db, django_user_model, heard
):
    """GET answers 404 for a schedule into a queue the caller may not see; a create of that name
    answered 409 "already exists". Now it is the refusal of a name the caller may not use."""
    for name in ("payroll", "orders"):
        service.create_queue(fdbqueue_db, name, "fifo")
    schedules.create(fdbqueue_db, "payroll-export", {"kind": "push", "queue": "payroll", "value": 1}, interval=60)
    client = client_of(django_user_model, "narrow", {"orders": "view,manage"})
    assert client.get("/api/schedules/payroll-export/").status_code == 404
    heard.clear()
    body = {"name": "payroll-export", "target": {"kind": "push", "queue": "orders", "value": 1}, "interval": 60}
    response = client.post("/api/schedules/", body, format="json")
    assert response.status_code == 403, response.content
    assert response.json()["code"] == "permission_denied"
    assert "exist" not in response.content.decode() and 'payroll"' not in response.content.decode()
    assert heard == [("refused", "manage")]
    assert schedules.get(fdbqueue_db, "payroll-export").target["queue"] == "payroll"


def test_creating_a_schedule_under_a_visible_schedule_s_name_says_it_exists(fdbqueue_db, django_user_model):
    service.create_queue(fdbqueue_db, "orders", "fifo")
    schedules.create(fdbqueue_db, "tick", {"kind": "push", "queue": "orders", "value": 1}, interval=60)
    client = client_of(django_user_model, "manager", {"orders": "view,manage"})
    body = {"name": "tick", "target": {"kind": "push", "queue": "orders", "value": 2}, "interval": 60}
    response = client.post("/api/schedules/", body, format="json")
    assert response.status_code == 409 and response.json()["code"] == "schedule_already_exists"


# -- the browsable API ------------------------------------------------------------------------------


def test_the_browsable_api_shows_a_viewer_the_queue_without_forms_or_refusals(fdbqueue_db, django_user_model, heard):
    """DRF's HTML renderer asks whether it may draw the PATCH and DELETE forms; our refusal was
    Django's PermissionDenied, which it does not catch: a 403 page, and a manage refusal counted."""
    service.create_queue(fdbqueue_db, "orders", "fifo")
    client = client_of(django_user_model, "viewer", {"orders": "view"})
    assert client.get("/api/queues/orders/", HTTP_ACCEPT="application/json").status_code == 200
    response = client.get("/api/queues/orders/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200, response.content[:300]
    page = response.content.decode()
    assert "orders" in page and 'data-method="DELETE"' not in page and 'data-method="PATCH"' not in page
    assert heard == []


def test_the_browsable_api_draws_the_forms_a_manager_may_use(fdbqueue_db, django_user_model, heard):
    service.create_queue(fdbqueue_db, "orders", "fifo")
    client = client_of(django_user_model, "boss", {"orders": "view,manage,delete"})
    response = client.get("/api/queues/orders/", HTTP_ACCEPT="text/html")
    assert response.status_code == 200
    assert 'data-method="DELETE"' in response.content.decode()
    assert heard == []


def test_a_real_refusal_is_still_counted_when_the_browsable_api_answers(fdbqueue_db, django_user_model, heard):
    service.create_queue(fdbqueue_db, "orders", "fifo")
    client = client_of(django_user_model, "viewer", {"orders": "view"})
    response = client.post("/api/queues/orders/clear/", HTTP_ACCEPT="text/html")
    assert response.status_code == 403
    assert heard == [("refused", "manage")]


# -- what is audited --------------------------------------------------------------------------------


def test_the_queues_traffic_is_not_audited_and_changes_are(fdbqueue_db, django_user_model, heard):
    """The rule the permissions guide states once (issue 36: the changes page said every change)."""
    from django.contrib.admin.models import LogEntry

    client = client_of(django_user_model, "worker", {"jobs": "view,push,consume,manage"})
    assert client.post("/api/queues/", {"name": "jobs", "kind": "fifo"}, format="json").status_code == 201
    assert client.post("/api/queues/jobs/push/", {"value": 1}, format="json").status_code == 201
    assert client.post("/api/queues/jobs/push/", {"value": 2}, format="json").status_code == 201
    assert client.post("/api/queues/jobs/pop/").status_code == 200
    lease = client.post("/api/queues/jobs/claim/", {"lease": 30}, format="json").json()
    assert client.post("/api/queues/jobs/ack/", {"receipt": lease["receipt"]}, format="json").status_code == 204
    assert heard == [("audited", "manage")]
    assert [entry.object_repr for entry in LogEntry.objects.all()] == ["jobs"]
