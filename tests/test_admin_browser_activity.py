"""The activity charts in a real browser (Debian's Chromium, Playwright): they render (a canvas and
a Chart.js instance per chart) and move after a push without the page being reloaded, at desktop
and phone width, on the activity page and on a queue's page. The browser comes from
``browser_helpers.py``; screenshots go to ``artifacts/screenshots/``."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from django_fdbqueue import service

from .browser_helpers import DESKTOP, PHONE, SCREENSHOTS, log_in, open_page
from .browser_helpers import browser, operator  # noqa: F401 - fixtures, found by name

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The charts' state, read in the browser.
STATE = """() => {
    const section = document.querySelector('section.fdbqueue-activity');
    const canvases = [...section.querySelectorAll('canvas')];
    return {
        charts: canvases.filter(c => window.Chart && Chart.getChart(c)).length,
        canvases: canvases.length,
        widest: Math.max(...canvases.map(c => Math.ceil(c.getBoundingClientRect().right))),
        narrowest: Math.min(...canvases.map(c => c.getBoundingClientRect().width)),
        window: window.innerWidth,
        page: document.documentElement.scrollWidth,
        updates: Number(section.dataset.updates || 0),
        pushed: Number(section.dataset.pushed || 0),
        loads: performance.getEntriesByType('navigation').length,
    };
}"""
# Up to this long for the next fetch (every 5 s) to show a change, on a loaded machine.
UPDATE_TIMEOUT_MS = 30_000


def _pushed_becomes(page, count: int) -> None:
    page.wait_for_function(
        "(n) => Number(document.querySelector('section.fdbqueue-activity').dataset.pushed || 0) === n",
        arg=count,
        timeout=UPDATE_TIMEOUT_MS,
    )


def _check_drawn(page, size: dict) -> dict:
    page.set_viewport_size(size)
    try:  # Chart.js resizes its canvases on the frame after the window's change
        page.wait_for_function(
            f"() => {{ const s = ({STATE})(); return s.updates && s.page <= s.window; }}", timeout=10_000
        )
    except Exception:  # noqa: BLE001 - the assertions below say what is wrong
        pass
    state = page.evaluate(STATE)
    assert state["canvases"] == 2 and state["charts"] == 2, state
    assert state["page"] <= state["window"], f"the page is wider than the window: {state}"
    assert state["widest"] <= state["window"] and state["narrowest"] > 100, state
    return state


@pytest.mark.parametrize("where", ["overview", "queue"])
def test_the_charts_render_and_move_without_a_reload(fdbqueue_db, live_server, operator, browser, where):
    service.create_queue(fdbqueue_db, "jobs", "fifo")
    service.push(fdbqueue_db, "jobs", 1)
    context, page, errors = open_page(browser)
    log_in(page, live_server.url + reverse("admin:login"))
    page.wait_for_url(re.compile(r"/admin/$"))
    address = (
        reverse("admin:fdbqueue_queue_activity")
        if where == "overview"
        else reverse("admin:fdbqueue_queue_change", args=["jobs"])
    )
    page.goto(live_server.url + address)
    page.evaluate("() => { window.notReloaded = true; }")
    _pushed_becomes(page, 1)

    for number, size in enumerate((DESKTOP, PHONE), start=2):
        _check_drawn(page, size)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"activity-{where}-{size['width']}.png"), full_page=True)
        service.push(fdbqueue_db, "jobs", number)
        _pushed_becomes(page, number)  # the next fetch drew it
        assert page.evaluate("() => window.notReloaded === true"), "the page was reloaded"

    page.click("section.fdbqueue-activity button[data-span=day]")
    page.wait_for_function(
        "() => document.querySelector('section.fdbqueue-activity').dataset.span === 'day'"
        " && Chart.getChart(document.querySelector('.fdbqueue-chart-throughput')).data.labels.length === 24",
        timeout=UPDATE_TIMEOUT_MS,
    )
    assert not errors, errors
    context.close()


def test_the_per_queue_links_stand_apart(fdbqueue_db, live_server, operator, browser):
    """The activity page's per-queue links are apart, without the admin's square list markers
    (its ``ul li`` rule) drawn between them."""
    for name in ("emails", "jobs", "reports"):
        service.create_queue(fdbqueue_db, name, "fifo")
        service.push(fdbqueue_db, name, 1)
    context, page, errors = open_page(browser)
    log_in(page, live_server.url + reverse("admin:login"))
    page.wait_for_url(re.compile(r"/admin/$"))
    page.goto(live_server.url + reverse("admin:fdbqueue_queue_activity"))
    links = page.evaluate("""() => [...document.querySelectorAll('.fdbqueue-activity-queues li')].map(li => {
        const box = li.querySelector('a').getBoundingClientRect();
        return {marker: getComputedStyle(li).listStyleType, left: box.left, right: box.right, top: box.top};
    })""")
    assert [link["marker"] for link in links] == ["none"] * 3, links
    for before, after in zip(links, links[1:]):
        if after["top"] == before["top"]:  # on one line: a clear gap between the two
            assert after["left"] - before["right"] >= 12, links
    assert not errors, errors
    context.close()
