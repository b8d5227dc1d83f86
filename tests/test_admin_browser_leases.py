"""A dead letter requeued from the admin in a real browser (Debian's Chromium through Playwright).

The queue and its dead letter are made through the service; a user logs in, opens the queue's
dead-letter tab, presses "Requeue", and sees the item back among the ready items. Every wait is
one of Playwright's bounded waits (``expect`` and ``wait_for_*``), never a sleep. Screenshots of
the dead-letter and leased/delayed tabs, at desktop and phone widths, go to
``artifacts/screenshots/`` (git-ignored). The browser comes from ``browser_helpers.py``: without it
the test is skipped, except under CI (``CI=true``).
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from django_fdbqueue import service

from .browser_helpers import SCREENSHOTS, log_in, open_page, shoot
from .browser_helpers import browser, operator  # noqa: F401 - fixtures, found by name

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def dead_letter(fdbqueue_db):
    """A FIFO queue allowing one attempt, whose only item was claimed, released, and so died."""
    service.create_queue(fdbqueue_db, "invoices", "fifo", max_attempts=1)
    service.enqueue(fdbqueue_db, "invoices", {"invoice": 17})
    lease = service.claim(fdbqueue_db, "invoices", lease=600)
    assert service.release(fdbqueue_db, lease.receipt) == "dead"
    # Something to see on the other tab: one leased and one delayed item.
    service.enqueue(fdbqueue_db, "invoices", {"invoice": 18})
    assert service.claim(fdbqueue_db, "invoices", lease=600) is not None
    service.enqueue(fdbqueue_db, "invoices", {"invoice": 19}, delay=3600)
    return lease.item.id


def test_requeueing_a_dead_letter_in_the_browser(fdbqueue_db, live_server, operator, browser, dead_letter):
    from playwright.sync_api import expect

    context, page, errors = open_page(browser)
    log_in(page, live_server.url + reverse("admin:login"))
    page.wait_for_url(re.compile(r"/admin/$"))

    page.goto(live_server.url + reverse("admin:fdbqueue_queue_change", args=("invoices",)))
    expect(page.locator("#stat-dead")).to_have_text("1")
    expect(page.locator("#stat-max-attempts")).to_have_text("1")
    page.get_by_role("link", name="Dead letters (1)").click()
    page.wait_for_url(re.compile(r"\?view=dead$"))

    row = page.locator(f'tr.fdbqueue-dead[data-item-id="{dead_letter}"]')
    expect(row).to_have_count(1)
    expect(row.locator("td.field-attempts")).to_have_text("1")
    expect(row.locator("pre.fdbqueue-value")).to_have_text('{\n  "invoice": 17\n}')
    shoot(page, "queue-dead-letters")

    row.get_by_role("button", name="Requeue").click()
    expect(page.locator("ul.messagelist li.success")).to_contain_text("Requeued the dead letter")
    expect(page.locator("tr.fdbqueue-dead")).to_have_count(0)
    expect(page.locator("#stat-dead")).to_have_text("0")
    expect(page.locator("#stat-size")).to_have_text("1")
    expect(page.locator("ul.messagelist li.success")).to_contain_text('"invoice": 17')

    page.get_by_role("link", name="Ready items (1)").click()
    expect(page.locator("tr.fdbqueue-item pre.fdbqueue-value")).to_have_text(['{\n  "invoice": 17\n}'])
    expect(page.locator("tr.fdbqueue-item td.field-attempts")).to_have_text(["0"])

    page.get_by_role("link", name="Leased and delayed (2)").click()
    expect(page.locator("tr.fdbqueue-scheduled td.field-state")).to_have_text(["leased", "delayed"])
    shoot(page, "queue-scheduled")
    assert not errors, errors

    info = service.get_queue(fdbqueue_db, "invoices")
    assert (info.size, info.dead) == (1, 0)
    assert [item.id for item in service.browse(fdbqueue_db, "invoices").items] == [dead_letter]
    for name in ("queue-dead-letters", "queue-scheduled"):
        for label in ("desktop", "phone"):
            assert (SCREENSHOTS / f"{name}-{label}.png").stat().st_size > 0
    context.close()
