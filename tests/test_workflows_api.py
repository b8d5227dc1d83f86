"""The workflows routes of the REST API: list, retrieve, cancel, and who may use each.

A workflow is its members' task queues' (``tasks.default`` and ``tasks.emails`` here): ``view``
on every one of them shows it, ``consume`` on every one of them cancels it.
"""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from django_fdbqueue.models import QueueGrant
from django_fdbqueue.tasks.workflows import call, chain, get_workflow, group
from tests.api_helpers import anonymous, api, assert_error, user  # noqa: F401 - fixtures

from . import workflow_tasks as wt

pytestmark = pytest.mark.django_db

URL = "/api/workflows/"


@pytest.fixture
def two_queues(fdbqueue_db):
    """A chain whose second step runs in the task queue "emails"."""
    return chain(call(wt.double, 1), call(wt.double.using(queue_name="emails"), 2)).enqueue(name="mail")


@pytest.fixture
def one_queue(fdbqueue_db):
    return group(call(wt.double, 1), call(wt.double, 2)).enqueue(name="plain")


def client_with(django_user_model, username: str, **grants: str) -> APIClient:
    """A client for a new user with these grants (pattern -> actions), nothing else."""
    person = django_user_model.objects.create_user(username, password="pw")
    for pattern, actions in grants.items():
        QueueGrant.objects.create(user=person, pattern=pattern, actions=actions)
    client = APIClient()
    client.force_authenticate(user=person)
    return client


def test_list_retrieve_and_cancel(api, two_queues, one_queue):
    listed = api.get(URL).json()
    assert [w["id"] for w in listed["results"]] == [two_queues.id, one_queue.id] and listed["next"] is None
    assert api.get(URL, {"status": "CANCELLED"}).json()["results"] == []
    first = api.get(URL, {"limit": 1}).json()
    assert [w["id"] for w in first["results"]] == [two_queues.id]
    assert [w["id"] for w in api.get(first["next"]).json()["results"]] == [one_queue.id]

    shown = api.get(f"{URL}{two_queues.id}/").json()
    assert (shown["name"], shown["status"], shown["size"]) == ("mail", "RUNNING", 2)
    assert [(n["index"], n["state"], n["attempts"], n["predecessors"]) for n in shown["nodes"]] == [
        (0, "READY", 0, 0),
        (1, "WAITING", 0, 1),
    ]
    paged = api.get(f"{URL}{two_queues.id}/", {"limit": 1}).json()
    assert [n["index"] for n in paged["nodes"]] == [0] and "after=0" in paged["next"]

    cancelled = api.post(f"{URL}{two_queues.id}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "CANCELLED"
    assert get_workflow(two_queues.id).status == "CANCELLED"


def test_unknown_ids_and_bad_queries(api, one_queue):
    assert_error(api.get(f"{URL}nope/"), 404, "workflow_not_found")
    assert_error(api.post(f"{URL}nope/cancel/"), 404, "workflow_not_found")
    assert_error(api.get(f"{URL}{one_queue.id}/", {"backend": "other"}), 404, "workflow_not_found")
    assert_error(api.get(URL, {"status": "bogus"}), 400)
    assert_error(api.get(URL, {"cursor": "bogus"}), 400)


def test_anonymous_is_refused(anonymous, one_queue):
    # 401 where the project's first authentication class can challenge (basic); 403 after session's.
    for response in (
        anonymous.get(URL),
        anonymous.get(f"{URL}{one_queue.id}/"),
        anonymous.post(f"{URL}{one_queue.id}/cancel/"),
    ):
        assert_error(response, response.status_code, "not_authenticated")
        assert response.status_code in (401, 403)
    assert get_workflow(one_queue.id).status == "RUNNING"


def test_view_on_every_member_queue_is_needed_to_see_one(django_user_model, two_queues, one_queue):
    default_only = client_with(django_user_model, "dee", **{"tasks.default": "view"})
    assert [w["id"] for w in default_only.get(URL).json()["results"]] == [one_queue.id]
    assert default_only.get(f"{URL}{one_queue.id}/").status_code == 200
    assert_error(default_only.get(f"{URL}{two_queues.id}/"), 404, "workflow_not_found")
    assert_error(default_only.post(f"{URL}{two_queues.id}/cancel/"), 404, "workflow_not_found")

    both = client_with(django_user_model, "bo", **{"tasks.*": "view"})
    assert {w["id"] for w in both.get(URL).json()["results"]} == {one_queue.id, two_queues.id}
    assert both.get(f"{URL}{two_queues.id}/").status_code == 200

    elsewhere = client_with(django_user_model, "el", **{"orders": "view,consume"})
    assert elsewhere.get(URL).json()["results"] == []
    assert_error(elsewhere.get(f"{URL}{one_queue.id}/"), 404, "workflow_not_found")


def test_a_restricted_list_pages_with_a_sealed_cursor(django_user_model, two_queues, one_queue):
    default_only = client_with(django_user_model, "dee", **{"tasks.default": "view"})
    first = default_only.get(URL, {"limit": 1}).json()
    assert first["results"] == [] and two_queues.id not in first["next"]
    assert [w["id"] for w in default_only.get(first["next"]).json()["results"]] == [one_queue.id]


def test_cancel_needs_consume_on_every_member_queue(django_user_model, two_queues):
    viewer = client_with(django_user_model, "vi", **{"tasks.*": "view", "tasks.default": "consume"})
    body = assert_error(viewer.post(f"{URL}{two_queues.id}/cancel/"), 403, "permission_denied")
    assert body["action"] == "consume"
    assert get_workflow(two_queues.id).status == "RUNNING"
    consumer = client_with(django_user_model, "co", **{"tasks.*": "view,consume"})
    assert consumer.post(f"{URL}{two_queues.id}/cancel/").status_code == 200
    assert get_workflow(two_queues.id).status == "CANCELLED"


def test_a_superuser_may_do_everything(django_user_model, two_queues):
    boss = django_user_model.objects.create_superuser("boss", password="pw")
    client = APIClient()
    client.force_authenticate(user=boss)
    assert client.get(f"{URL}{two_queues.id}/").status_code == 200
    assert client.post(f"{URL}{two_queues.id}/cancel/").status_code == 200
