"""The admin's workflow pages: the list by status, a workflow's graph, the cancel button, and
who may use each (``view`` on every member's task queue to see one, ``consume`` to cancel)."""

from __future__ import annotations

import pytest
from django.test import Client

from django_fdbqueue.models import QueueGrant
from django_fdbqueue.tasks.workflows import call, chain, get_workflow, group

from . import workflow_tasks as wt
from .admin_helpers import client_for, make_user, op, operator, text, url  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_queues(fdbqueue_db):
    """A chain whose second step runs in the task queue "emails"."""
    return chain(call(wt.double, 1), call(wt.double.using(queue_name="emails"), 2)).enqueue(name="mail")


@pytest.fixture
def one_queue(fdbqueue_db):
    return group(call(wt.double, 1), call(wt.double, 2)).enqueue(name="plain")


def granted(django_user_model, username: str, staff: bool = True, **grants: str) -> Client:
    person = make_user(django_user_model, username, staff=staff)
    for pattern, actions in grants.items():
        QueueGrant.objects.create(user=person, pattern=pattern, actions=actions)
    client = Client(enforce_csrf_checks=True)
    client.force_login(person)
    return client


def test_the_entry_the_list_and_the_graph(op, two_queues, one_queue):
    index = text(op.get("/admin/"))
    assert "Workflows" in index
    page = op.get(url("workflows"))
    assert page.status_code == 200
    assert two_queues.id in text(page) and one_queue.id in text(page) and "Running (2)" in text(page)
    assert two_queues.id not in text(op.get(url("workflows") + "?status=CANCELLED"))

    detail = text(op.get(url("workflow_detail", "default", two_queues.id)))
    assert "tests.workflow_tasks.double" in detail and "tasks.default, tasks.emails" in detail
    assert 'data-node="1"' in detail and "WAITING" in detail and "READY" in detail
    assert 'id="cancel-form"' in detail


def test_the_cancel_button_cancels_on_post_only(op, two_queues):
    address = url("workflow_cancel", "default", two_queues.id)
    assert op.get(address).status_code == 302
    assert get_workflow(two_queues.id).status == "RUNNING"
    response = op.post(address, follow=True)
    assert response.status_code == 200 and "is cancelled" in text(response)
    assert get_workflow(two_queues.id).status == "CANCELLED"
    assert 'id="cancel-form"' not in text(response)


def test_the_cancel_button_needs_the_csrf_token(django_user_model, two_queues):
    client = granted(django_user_model, "csrf", **{"tasks.*": "view,consume"})
    assert client.post(url("workflow_cancel", "default", two_queues.id)).status_code == 403
    assert get_workflow(two_queues.id).status == "RUNNING"


def test_view_on_every_member_queue_is_needed(django_user_model, two_queues, one_queue):
    default_only = granted(django_user_model, "dee", **{"tasks.default": "view"})
    listed = text(default_only.get(url("workflows")))
    assert one_queue.id in listed and two_queues.id not in listed
    assert default_only.get(url("workflow_detail", "default", one_queue.id)).status_code == 200
    assert default_only.get(url("workflow_detail", "default", two_queues.id)).status_code == 404
    assert 'id="cancel-form"' not in text(default_only.get(url("workflow_detail", "default", one_queue.id)))


def test_cancel_needs_consume_on_every_member_queue(django_user_model, two_queues):
    granted(django_user_model, "vi", **{"tasks.*": "view", "tasks.default": "consume"})
    viewer = Client()  # without the CSRF check: the refusal must be the permission's
    viewer.force_login(django_user_model.objects.get(username="vi"))
    assert 'id="cancel-form"' not in text(viewer.get(url("workflow_detail", "default", two_queues.id)))
    assert viewer.post(url("workflow_cancel", "default", two_queues.id)).status_code == 403
    assert get_workflow(two_queues.id).status == "RUNNING"


def test_others_are_refused(django_user_model, client, two_queues):
    assert client.get(url("workflows")).status_code == 302  # to the login page
    not_staff = granted(django_user_model, "ns", staff=False, **{"*": "view,consume"})
    assert not_staff.get(url("workflows")).status_code == 302
    nothing = granted(django_user_model, "no")
    assert nothing.get(url("workflows")).status_code == 403
    assert nothing.get(url("workflow_detail", "default", two_queues.id)).status_code == 403
    assert "Workflows" not in text(nothing.get("/admin/"))


def test_unknown_workflows_backends_and_statuses_are_404(op, one_queue):
    assert op.get(url("workflow_detail", "default", "nope")).status_code == 404
    assert op.get(url("workflow_detail", "other", one_queue.id)).status_code == 404
    assert op.get(url("workflows") + "?status=BOGUS").status_code == 404
    assert op.get(url("workflows") + "?after=bogus").status_code == 200
