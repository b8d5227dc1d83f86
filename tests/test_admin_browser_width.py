"""The queue list at laptop and phone widths, in a real browser (Debian's Chromium, Playwright).

At 1366x768, the most common laptop screen, with the admin's navigation sidebar open, every
column of the queue list must be on screen: the table no wider than its box (nothing hidden
behind a sideways scroll) and the page no wider than the window. The queues are chosen to be
wide: a long dotted name, the 64-bit priority extremes, an attempt limit of 1000, and each count
non-zero on some row. At 390 px (a phone) the page must not widen either: the table scrolls
sideways inside its own box, as the other tables of the app do. Screenshots of both go to
``artifacts/screenshots/`` (git-ignored); the browser comes from ``browser_helpers.py``.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from django_fdbqueue import service

from .browser_helpers import PHONE, SCREENSHOTS, log_in, open_page
from .browser_helpers import browser, operator  # noqa: F401 - fixtures, found by name

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAPTOP = {"width": 1366, "height": 768}
LONG_NAME = "billing.invoices.monthly-reminders.eu-west-1"
LOWEST, HIGHEST = -(2**63), 2**63 - 1

# Widths the page lays out, read in the browser: the window, the page, the table and its box.
MEASURE = """() => {
    const table = document.querySelector('#result_list');
    const box = table.closest('.results');
    return {
        window: window.innerWidth,
        page: document.documentElement.scrollWidth,
        table: Math.ceil(table.getBoundingClientRect().width),
        box: box.clientWidth,
        columns: table.querySelectorAll('thead th').length,
        lastColumnEnd: Math.ceil(table.querySelector('thead th:last-child').getBoundingClientRect().right),
        sidebar: !!document.querySelector('#nav-sidebar') && document.querySelector('#nav-sidebar').offsetWidth,
    };
}"""


@pytest.fixture
def wide_queues(fdbqueue_db):
    """Queues whose cells are as wide as the list will meet: every statistic has a value."""
    service.create_queue(fdbqueue_db, LONG_NAME, "priority", max_attempts=1000)
    service.push(fdbqueue_db, LONG_NAME, {"invoice": 1}, 7)
    assert service.claim(fdbqueue_db, LONG_NAME, end="max", lease=600) is not None
    service.push(fdbqueue_db, LONG_NAME, {"invoice": 2}, LOWEST)
    service.push(fdbqueue_db, LONG_NAME, {"invoice": 3}, HIGHEST)
    service.push(fdbqueue_db, LONG_NAME, {"invoice": 4}, 0, delay=3600)
    service.create_queue(fdbqueue_db, "demo.emails", "fifo", max_attempts=1)
    for number in range(3):
        service.enqueue(fdbqueue_db, "demo.emails", {"to": f"user{number}@example.com"})
    lease = service.claim(fdbqueue_db, "demo.emails", lease=600)
    assert service.release(fdbqueue_db, lease.receipt) == "dead"
    service.create_queue(fdbqueue_db, "demo.jobs", "priority")
    return fdbqueue_db


@pytest.fixture
def token_keeper(operator):
    """The operator may also see the API tokens, so the list's tool links are all there."""
    operator.user_permissions.add(*Permission.objects.filter(content_type__app_label="knox"))
    return operator


def test_the_queue_list_fits_a_laptop_and_a_phone(wide_queues, live_server, token_keeper, browser):
    from playwright.sync_api import expect

    context, page, errors = open_page(browser)
    page.set_viewport_size(LAPTOP)
    log_in(page, live_server.url + reverse("admin:login"))
    page.wait_for_url(re.compile(r"/admin/$"))
    page.goto(live_server.url + reverse("admin:fdbqueue_queue_changelist"))
    expect(page.locator("#result_list th.field-name")).to_have_text([LONG_NAME, "demo.emails", "demo.jobs"])
    expect(page.locator("#tokens-link")).to_be_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "queue-list-wide-laptop.png"), full_page=True)

    laptop = page.evaluate(MEASURE)
    assert laptop["sidebar"], "the admin's navigation sidebar should be open at laptop width"
    assert laptop["page"] <= laptop["window"], laptop
    assert laptop["table"] <= laptop["box"], f"columns hidden behind a sideways scroll: {laptop}"
    assert laptop["lastColumnEnd"] <= laptop["window"], laptop
    # Nothing was dropped to get there: every statistic is on the row.
    row = page.locator("#result_list tbody tr").first
    expect(row.locator("td.field-priorities")).to_have_text(f"{LOWEST} to {HIGHEST}")
    expect(row.locator("td.field-totals")).to_have_text("4 / 0")
    expect(row.locator("td.field-leased")).to_have_text("1")
    expect(row.locator("td.field-delayed")).to_have_text("1")
    expect(row.locator("td.field-max-attempts")).to_have_text("1000")
    expect(page.locator("#result_list tbody tr").nth(1).locator("td.field-dead")).to_have_text("1")

    page.set_viewport_size(PHONE)
    page.screenshot(path=str(SCREENSHOTS / "queue-list-wide-phone.png"), full_page=True)
    phone = page.evaluate(MEASURE)
    assert phone["page"] <= phone["window"], f"the page is wider than a phone: {phone}"
    assert phone["box"] <= phone["window"], phone
    # The first column and the create form are within the screen; the rest scrolls in its box.
    name_box = page.locator("#result_list tbody th.field-name").first.bounding_box()
    assert name_box and name_box["x"] >= 0 and name_box["x"] + name_box["width"] <= PHONE["width"], name_box
    form_box = page.locator("#create-queue input[name=name]").bounding_box()
    assert form_box and form_box["x"] + form_box["width"] <= PHONE["width"], form_box
    assert not errors, errors
    context.close()
