"""The REST API of queues split by tenant: the create option, a push's tenant, the tenant count
in the queue's detail, turns, and 400s with nothing stored for bad input."""

from __future__ import annotations

import pytest

from .api_helpers import API, assert_error, make_queue, push, queue_url
from .api_helpers import api, user  # noqa: F401 - fixtures, found by name (api needs user)

pytestmark = pytest.mark.django_db


def test_tenant_queue_over_rest(api, monkeypatch):
    from django_fdbqueue.service._internals import tenantturns

    monkeypatch.setattr(tenantturns, "CHOICES", 1)
    created = make_queue(api, "t", tenants=True)
    assert created["tenants"] == 0
    assert make_queue(api, "plain")["tenants"] is None
    assert push(api, "t", {"items": [{"value": "a0"}, {"value": "a1"}], "tenant": "A"}).status_code == 201
    assert push(api, "t", {"value": "b0", "tenant": "é" * 50}).status_code == 201
    assert api.get(queue_url("t")).json()["tenants"] == 2
    got = []
    for _ in range(3):
        response = api.post(queue_url("t", "claim"), {}, format="json")
        body = response.json()
        got.append(body["item"]["value"])
        assert api.post(queue_url("t", "ack"), {"receipt": body["receipt"]}, format="json").status_code == 204
    assert got == ["a0", "b0", "a1"]
    info = api.get(queue_url("t")).json()
    assert (info["tenants"], info["size"], info["popped"]) == (0, 0, 3)


@pytest.mark.parametrize(
    "name, extra",
    [
        ("t", {}),  # a tenant queue needs a tenant
        ("plain", {"tenant": "A"}),  # a plain queue takes none
        ("t", {"tenant": ""}),
        ("t", {"tenant": "x" * 101}),
        ("t", {"tenant": "é" * 51}),
        ("t", {"tenant": 12}),
        ("t", {"tenant": None}),
    ],
)
def test_a_bad_tenant_is_400_and_stores_nothing(api, name, extra):
    make_queue(api, "t", tenants=True)
    make_queue(api, "plain")
    body = assert_error(push(api, name, {"value": 1, **extra}), 400)
    assert body["code"] in ("invalid", "invalid_argument"), body
    assert_error(push(api, name, {"items": [{"value": 1}], **extra}), 400)
    for queue in ("t", "plain"):
        assert api.get(queue_url(queue)).json()["pushed"] == 0


@pytest.mark.parametrize(
    "body", [{"tenants": "yes"}, {"tenants": 1}, {"tenants": None}, {"tenants": True, "key_concurrency": 2}]
)
def test_bad_tenants_option_is_400_and_creates_nothing(api, body):
    assert_error(api.post(API, {"name": "q", **body}, format="json"), 400)
    assert api.get(API).json()["results"] == []


@pytest.mark.parametrize(
    "body", [{"key_concurrency": 1}, {"key_rate": 2.5, "max_attempts": 3}, {"key_concurrency": None, "key_rate": 1}]
)
def test_patching_key_limits_on_a_tenant_queue_is_400_as_at_create(api, body):
    """Issue 28: the PATCH took what the create refuses; nothing of the PATCH is stored."""
    at_create = assert_error(api.post(API, {"name": "u", "tenants": True, "key_concurrency": 1}, format="json"), 400)
    make_queue(api, "t", tenants=True)
    refused = assert_error(api.patch(queue_url("t"), body, format="json"), 400)
    assert refused == at_create
    info = api.get(queue_url("t")).json()
    assert (info["key_concurrency"], info["key_rate"], info["max_attempts"], info["tenants"]) == (None, None, None, 0)
    removed = api.patch(queue_url("t"), {"key_concurrency": None, "key_rate": None}, format="json")
    assert removed.status_code == 200, removed.content
