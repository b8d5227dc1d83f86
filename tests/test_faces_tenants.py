"""Queues split by tenant in the admin's queue page (count, largest tenants, the push form's
tenant field) and in the CLI (create --tenants, push --tenant, stats)."""

from __future__ import annotations

import json

import pytest

from django_fdbqueue import service

from .admin_helpers import text, url
from .admin_helpers import client_for, op, operator  # noqa: F401 - fixtures, found by name
from .cli_helpers import run

pytestmark = pytest.mark.django_db


@pytest.fixture
def split(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "split", tenants=True)
    service.create_queue(db, "plain")
    service.push_many(db, "split", ["a1", "a2", "a3"], tenant="acme")
    service.push(db, "split", "b1", tenant="beta")
    return db


def test_the_queue_page_shows_the_tenants(op, split):
    page = text(op.get(url("change", "split")))
    assert '<td id="stat-tenants">2</td>' in page
    assert '<td id="stat-largest-tenants">acme (3), beta (1)</td>' in page
    assert 'name="tenant"' in page
    plain = text(op.get(url("change", "plain")))
    assert "stat-tenants" not in plain and 'name="tenant"' not in plain


def test_the_admin_push_form_takes_a_tenant(op, split):
    response = op.post(url("push", "split"), {"value": '"c1"', "tenant": "cyan"})
    assert response.status_code == 302
    assert service.get_queue(split, "split").tenants == 3
    response = op.post(url("push", "split"), {"value": '"c2"'})  # the tenant is required
    assert response.status_code == 200
    assert service.get_queue(split, "split").pushed == 5


def test_the_admin_creates_a_queue_split_by_tenant(op, fdbqueue_db):
    response = op.post(url("add"), {"name": "split", "kind": "fifo", "tenants": "on"})
    assert response.status_code == 302
    assert service.get_queue(fdbqueue_db, "split").tenants == 0
    assert op.post(url("add"), {"name": "plain", "kind": "fifo"}).status_code == 302
    assert service.get_queue(fdbqueue_db, "plain").tenants is None


def test_cli_create_push_and_stats(fdbqueue_db):
    created = run("create", "jobs", "--tenants", "--json")
    assert created.code == 0, created.err
    assert json.loads(created.out)["tenants"] == 0
    assert run("push", "jobs", '"a1"', "--tenant", "acme").code == 0
    assert run("push", "jobs", '"b1"', "--tenant", "beta").code == 0
    stats = run("stats", "jobs")
    assert "2 with ready items" in stats.out
    assert json.loads(run("stats", "jobs", "--json").out)["tenants"] == 2
    refused = run("push", "jobs", '"x"')
    assert refused.code == 2 and "needs tenant" in refused.err
    assert run("push", "jobs", '"x"', "--tenant", "t" * 101).code == 2
    assert run("create", "plain").code == 0
    assert run("push", "plain", '"x"', "--tenant", "acme").code == 2
    assert service.get_queue(fdbqueue_db, "jobs").pushed == 2
    assert service.get_queue(fdbqueue_db, "plain").pushed == 0


@pytest.mark.parametrize("flags", [("--concurrency", "1"), ("--rate", "2.5"), ("--concurrency", "none", "--rate", "1")])
def test_cli_set_key_limits_on_a_tenant_queue_exits_2_as_create_does(fdbqueue_db, flags):
    """Issue 28: set-key-limits took what create refuses; the same message, nothing stored."""
    at_create = run("create", "u", "--tenants", "--key-concurrency", "1")
    assert at_create.code == 2 and "no per-key limits" in at_create.err
    service.create_queue(fdbqueue_db, "t", tenants=True)
    refused = run("set-key-limits", "t", *flags)
    assert (refused.code, refused.err) == (2, at_create.err)
    info = service.get_queue(fdbqueue_db, "t")
    assert (info.key_concurrency, info.key_rate, info.tenants) == (None, None, 0)
    assert run("set-key-limits", "t", "--concurrency", "none").code == 0
