"""Fixtures and small helpers for the REST API tests, through DRF's test client.

Shared by the API test files so both log in, address queues and check error
bodies the same way. Import the fixtures by name into a test module to use them there.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest
from rest_framework.test import APIClient

API = "/api/queues/"


@pytest.fixture
def user(django_user_model):
    """A user granted every action on every queue (a grant on "*", not a superuser)."""
    alice = django_user_model.objects.create_user("alice", password="wonderland")
    grant_everything(alice)
    return alice


def grant_everything(user: Any) -> None:
    """Every action on every queue, through a grant: what any authenticated user had before grants."""
    from django_fdbqueue.access import ACTIONS
    from django_fdbqueue.models import QueueGrant

    QueueGrant.objects.create(user=user, pattern="*", actions=",".join(ACTIONS))


@pytest.fixture
def api(fdbqueue_db, user) -> APIClient:
    """An authenticated client on a fresh store."""
    client = APIClient()
    client.force_authenticate(user=user)
    return client


@pytest.fixture
def anonymous(fdbqueue_db) -> APIClient:
    return APIClient()


def queue_url(name: str, action: str | None = None) -> str:
    return f"{API}{name}/" + (f"{action}/" if action else "")


def make_queue(api: APIClient, name: str, kind: str = "fifo", **extra: Any) -> dict:
    """Create a queue through the API (``extra``: more fields of the body, such as max_attempts)."""
    response = api.post(API, {"name": name, "kind": kind, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def push(api: APIClient, name: str, body: dict):
    return api.post(queue_url(name, "push"), body, format="json")


def assert_error(response, status: int, code: str | None = None) -> dict:
    """Every error: the status, a JSON body with "detail" and a stable "code"."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body.get("detail"), str) and body["detail"]
    assert isinstance(body.get("code"), str) and body["code"]
    if code is not None:
        assert body["code"] == code, body
    return body


def assert_empty_204(response) -> None:
    assert response.status_code == 204, response.content
    assert response.content == b""


def poll(attempt: Callable[[], Any], what: str, deadline: float = 10.0) -> Any:
    """Call ``attempt`` until it returns something truthy; fail after ``deadline`` seconds."""
    stop = time.monotonic() + deadline
    pause = threading.Event()
    while True:
        result = attempt()
        if result:
            return result
        assert time.monotonic() < stop, f"timed out waiting for {what}"
        pause.wait(0.02)
