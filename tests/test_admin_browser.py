"""The admin's queue pages in a real browser: Debian's Chromium driven by Playwright.

A user logs in, creates a priority queue, pushes three items, sees them in priority order, pops
the max end, and checks what the page then shows. A value carrying a ``<script>`` is shown as
text and never runs. Screenshots of the list and the queue page, at desktop and phone widths,
are saved under ``artifacts/screenshots/`` (git-ignored) for a person to look at.

The browser, its user and the screenshots come from ``browser_helpers.py``: without the
system's Chromium the test is skipped, except under CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from django_fdbqueue import service

from .browser_helpers import SCREENSHOTS, log_in, open_page, shoot
from .browser_helpers import browser, operator  # noqa: F401 - fixtures, found by name

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_operating_a_queue_in_the_browser(fdbqueue_db, live_server, operator, browser):
    from playwright.sync_api import expect

    context, page, errors = open_page(browser)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    # Log in through the admin's own form, then find the queues from the admin index.
    log_in(page, live_server.url + reverse("admin:index"))
    page.get_by_role("link", name="Queues", exact=True).click()
    page.wait_for_url(re.compile(r"/admin/fdbqueue/queue/$"))
    assert page.locator("div.breadcrumbs").inner_text().startswith("Home")

    # Create a priority queue with the form on the list page.
    page.fill("#create-queue input[name=name]", "render-jobs")
    page.select_option("#create-queue select[name=kind]", "priority")
    page.click("#create-queue input[type=submit]")
    page.wait_for_url(re.compile(r"/render-jobs/change/$"))
    assert "was created" in page.locator("ul.messagelist").inner_text()

    # Push three items with different priorities.
    for value, priority in (('{"job": "thumbnail"}', "5"), ('{"job": "backup"}', "-2"), ('{"job": "alert"}', "90")):
        page.fill("#push-form textarea[name=value]", value)
        page.fill("#push-form input[name=priority]", priority)
        page.click("#push-form input[type=submit]")
        page.wait_for_selector("ul.messagelist li.success")
    # expect() retries until the page shows it: a click only waits for the navigation to start.
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["-2", "5", "90"])
    values = page.locator("tr.fdbqueue-item pre.fdbqueue-value").all_inner_texts()
    assert values[0] == '{\n  "job": "backup"\n}'

    # The max end toggle reverses the order.
    page.get_by_role("link", name="max end", exact=True).click()
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["90", "5", "-2"])

    # Bad input is refused in place.
    page.fill("#push-form textarea[name=value]", "{oops")
    page.click("#push-form input[type=submit]")
    assert "Enter valid JSON" in page.locator("#push-form .errorlist").inner_text()
    assert page.locator("#stat-size").inner_text() == "3"

    # Pop the max end: the highest priority item leaves.
    page.get_by_role("button", name="Pop max").click()
    page.wait_for_selector("ul.messagelist li.success")
    expect(page.locator("ul.messagelist")).to_contain_text("priority 90")
    expect(page.locator("tr.fdbqueue-item td.field-priority")).to_have_text(["-2", "5"])
    assert page.locator("#stat-size").inner_text() == "2"
    assert page.locator("#stat-popped").inner_text() == "1"
    assert page.locator("#stat-max").inner_text() == "5"

    # A value carrying a script is shown as text and never runs.
    hostile = "<script>window.__pwned = true; document.title = 'pwned';</script>"
    page.fill("#push-form textarea[name=value]", '"' + hostile.replace('"', '\\"') + '"')
    page.fill("#push-form input[name=priority]", "0")
    page.click("#push-form input[type=submit]")
    page.wait_for_selector("ul.messagelist li.success")
    page.reload()
    assert page.evaluate("window.__pwned") is None
    assert page.title() != "pwned"
    assert page.get_by_text(hostile, exact=False).count() >= 1
    page.get_by_role("button", name="Peek min").click()
    page.wait_for_selector("ul.messagelist li.success")
    assert page.evaluate("window.__pwned") is None
    assert page.title() != "pwned"
    assert not dialogs and not errors, (dialogs, errors)
    assert service.size(fdbqueue_db, "render-jobs") == 3

    shoot(page, "queue")
    page.goto(live_server.url + reverse("admin:fdbqueue_queue_changelist"))
    expect(page.locator("#result_list th.field-name")).to_have_text(["render-jobs"])
    shoot(page, "queue-list")
    for name in ("queue", "queue-list"):
        for label in ("desktop", "phone"):
            assert (SCREENSHOTS / f"{name}-{label}.png").stat().st_size > 0
    context.close()
