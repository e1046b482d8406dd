"""Chaining in a real browser (issue #30 item 1): a person adds a schedule of kind "after"
on the admin's form, where only that kind shows the *Runs after* field, finds its upstream
by typing part of its name (the admin's autocomplete), saves, and the change pages say "Runs after: …" and
"Before: …", each a link.

Fixtures: tests/test_admin_browser.py (skipped without Chromium and Playwright; SQLite
only: vendor_independent).
"""

from __future__ import annotations

import re

import pytest

from .factories import T0
from .test_admin_browser import _login, browser_page, served_static  # noqa: F401 - fixtures

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.process,
    pytest.mark.vendor_independent,  # SQLite only, as tests/test_admin_browser.py
    pytest.mark.django_db(transaction=True),
]


def test_an_after_schedule_added_in_a_real_browser(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    from django_durable_schedules import state
    from django_durable_schedules.models import Schedule

    upstream = state.create_schedule(
        name="etl.import",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=T0,
    )
    page, base = browser_page, served_static.url
    _login(page, base, "/admin/durable_schedules/schedule/add/")
    page.select_option("#id_kind", "interval")  # another kind hides the chain's fields
    sync_api.expect(page.locator(".field-upstream")).to_be_hidden()
    sync_api.expect(page.locator("#id_interval_seconds")).to_be_visible()
    page.fill("#id_name", "etl.aggregate")
    page.select_option("#id_callback", "tests.noop")
    page.select_option("#id_kind", "after")  # shows them, hides the timing fields
    sync_api.expect(page.locator(".field-upstream")).to_be_visible()
    for field in ("#id_interval_seconds", "#id_cron", "#id_timezone", "#id_start_at"):
        sync_api.expect(page.locator(field)).to_be_hidden()
    page.click(".field-upstream .select2-selection")  # a search, not a list of all
    page.keyboard.type("etl.imp")
    page.locator(".select2-results__option", has_text="etl.import").click()
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r"/change/$"))
    made = Schedule.objects.get(name="etl.aggregate")
    assert made.kind == "after" and [u.name for u in made.upstream.all()] == ["etl.import"]
    chain = page.locator(".dds-chain")
    sync_api.expect(chain).to_contain_text("Runs after: etl.import")
    sync_api.expect(chain).to_contain_text("Before: none")
    chain.locator(".dds-chain-upstream").get_by_role("link", name="etl.import").click()
    page.wait_for_url(re.compile(rf"/schedule/{upstream.pk}/change/$"))
    sync_api.expect(page.locator(".dds-chain")).to_contain_text("Before: etl.aggregate")


def test_the_chain_graph_at_1280_px_links_each_box_light_and_dark(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    """The change page of a middle step draws its chain: every box inside the page at
    1280 px, the step itself outlined, a click on a box opens that schedule; the graph is
    legible in dark mode too (its text is not the page's background colour)."""
    from django_durable_schedules import state

    from .test_admin_browser import _shot_element

    root = state.create_schedule(
        name="etl.import",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=T0,
    )
    prices = state.create_schedule(
        name="etl.prices",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=T0,
    )
    middle = state.create_schedule(
        name="etl.aggregate", callback="tests.noop", kind="after", upstream=[root, prices]
    )
    last = state.create_schedule(
        name="etl.mail-the-daily-report", callback="tests.noop", kind="after", upstream=[middle]
    )
    page, base = browser_page, served_static.url
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, base, f"/admin/durable_schedules/schedule/{middle.pk}/change/")
    graph = page.locator(".dds-chain-graph svg")
    sync_api.expect(graph).to_be_visible()
    assert graph.locator("rect").count() == 4
    box = graph.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 1280, box
    words = page.locator("#dds-chain-title").text_content() or ""
    assert "etl.import then etl.aggregate" in words and graph.get_attribute("role") == "img"
    _shot_element(page.locator(".dds-chain"), "admin-chain-graph.png")
    page.emulate_media(color_scheme="dark")
    fill = page.locator(".dds-chain-self text").evaluate("e => getComputedStyle(e).fill")
    background = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert fill != background, (fill, background)
    _shot_element(page.locator(".dds-chain"), "admin-chain-graph-dark.png")
    page.emulate_media(color_scheme="light")
    graph.locator("a", has_text="etl.mail-the-daily-r").click()
    page.wait_for_url(re.compile(rf"/schedule/{last.pk}/change/$"))
    sync_api.expect(page.locator(".dds-chain")).to_contain_text("Runs after: etl.aggregate")
