"""The admin under grants in a real browser (Debian's Chromium through Playwright): a view-only
user and a consumer, each granted on ``orders.*`` only.

The view-only user finds only ``orders.eu`` in the list, no create form, no push, pop, clear or
delete on its page, peeks, and meets a 404 at another queue's address. The consumer pops. Every
wait is one of Playwright's bounded waits (``expect`` and ``wait_for_*``), never a sleep. The
browser comes from ``browser_helpers.py``: without it the test is skipped, except under CI.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from django_fdbqueue import service
from django_fdbqueue.models import QueueGrant

from .browser_helpers import PASSWORD, log_in, open_page, shoot
from .browser_helpers import browser  # noqa: F401 - fixture, found by name

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def queues(fdbqueue_db):
    """``orders.eu`` with three items of different priorities, and ``billing.in`` beside it."""
    service.create_queue(fdbqueue_db, "orders.eu", "priority")
    for value, priority in (({"order": 1}, 5), ({"order": 2}, -2), ({"order": 3}, 90)):
        service.push(fdbqueue_db, "orders.eu", value, priority)
    service.create_queue(fdbqueue_db, "billing.in", "fifo")
    service.push(fdbqueue_db, "billing.in", {"invoice": 1})
    return fdbqueue_db


def user_granted(django_user_model, username: str, actions: str):
    user = django_user_model.objects.create_user(username, password=PASSWORD, is_staff=True)
    QueueGrant.objects.create(user=user, pattern="orders.*", actions=actions)
    return user


def test_a_view_only_user_sees_only_its_queues_and_no_action_buttons(live_server, browser, queues, django_user_model):
    from playwright.sync_api import expect

    user_granted(django_user_model, "viewer", "view")
    context, page, errors = open_page(browser)
    log_in(page, live_server.url + reverse("admin:index"), "viewer")
    page.get_by_role("link", name="Queues", exact=True).click()
    page.wait_for_url(re.compile(r"/admin/fdbqueue/queue/$"))
    expect(page.locator("#result_list th.field-name")).to_have_text(["orders.eu"])
    assert page.locator("#create-queue").count() == 0 and page.locator("a.fdbqueue-delete").count() == 0

    page.get_by_role("link", name="orders.eu").click()
    page.wait_for_url(re.compile(r"/orders\.eu/change/$"))
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["-2", "5", "90"])
    for absent in ("#push-form", "#max-attempts-form", "text=Pop min", "text=Clear all items…", "text=Delete queue…"):
        assert page.locator(absent).count() == 0, absent
    page.get_by_role("button", name="Peek max").click()
    expect(page.locator("ul.messagelist li.success")).to_contain_text("priority 90")
    shoot(page, "access-view-only")

    response = page.goto(live_server.url + reverse("admin:fdbqueue_queue_change", args=["billing.in"]))
    assert response is not None and response.status == 404
    assert not errors, errors
    assert service.size(queues, "orders.eu") == 3 and service.size(queues, "billing.in") == 1
    context.close()


def test_a_consumer_pops_but_cannot_push(live_server, browser, queues, django_user_model):
    from playwright.sync_api import expect

    user_granted(django_user_model, "consumer", "view,consume")
    context, page, errors = open_page(browser)
    log_in(page, live_server.url + reverse("admin:fdbqueue_queue_change", args=["orders.eu"]), "consumer")
    page.wait_for_url(re.compile(r"/orders\.eu/change/$"))
    assert page.locator("#push-form").count() == 0 and page.locator("text=Clear all items…").count() == 0
    page.get_by_role("button", name="Pop max").click()
    expect(page.locator("ul.messagelist li.success")).to_contain_text("priority 90")
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["-2", "5"])
    assert page.locator("#stat-popped").inner_text() == "1"
    shoot(page, "access-consumer")
    assert not errors, errors
    assert service.size(queues, "orders.eu") == 2
    context.close()
