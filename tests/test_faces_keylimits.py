"""Per-key limit state in the admin's queue page and in the metrics."""

from __future__ import annotations

import pytest

from django_fdbqueue import service
from django_fdbqueue.metrics.collectors import QueueCollector

from .admin_helpers import text, url
from .admin_helpers import client_for, op, operator  # noqa: F401 - fixtures, found by name

pytestmark = pytest.mark.django_db


@pytest.fixture
def limited(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "limited", key_concurrency=1, key_rate=4)
    service.create_queue(db, "plain")
    service.push_many(db, "limited", ["a1", "a2"], key="acme")
    service.push(db, "limited", "b1", key="beta")
    assert service.claim(db, "limited").item.value == "a1"
    assert service.claim(db, "limited").item.value == "b1"
    return db


def test_the_queue_page_shows_the_limit_state(op, limited):
    page = text(op.get(url("change", "limited")))
    assert '<td id="stat-key-limits">1 leased at once, 4 claims per second per key</td>' in page
    assert '<td id="stat-keys-leased">2</td>' in page
    assert '<td id="stat-busiest-keys">acme (1), beta (1)</td>' in page
    assert '<td id="stat-keys-at-limit">acme, beta</td>' in page
    plain = text(op.get(url("change", "plain")))
    assert "stat-key-limits" not in plain


def test_the_metrics_show_the_limit_state(limited):
    families = {family.name: family for family in QueueCollector(database=lambda: limited).collect()}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for name in ("fdbqueue_queue_keys_leased", "fdbqueue_queue_keys_at_limit", "fdbqueue_queue_key_leases")
        for s in families[name].samples
    }
    assert samples == {
        ("fdbqueue_queue_keys_leased", (("queue", "limited"),)): 2,
        ("fdbqueue_queue_keys_at_limit", (("queue", "limited"),)): 2,
        ("fdbqueue_queue_key_leases", (("key", "acme"), ("queue", "limited"))): 1,
        ("fdbqueue_queue_key_leases", (("key", "beta"), ("queue", "limited"))): 1,
    }
    assert families["fdbqueue_store_up"].samples[0].value == 1
