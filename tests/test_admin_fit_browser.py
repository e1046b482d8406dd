"""Every list of the admin fits a laptop (issue #29, item 5): at 1280 px with the
navigation sidebar open, no column of any of the app's changelists is cut off (the table
never scrolls sideways), and schedule names never break mid-word. Real Chromium; a seeded
history (``_seed`` of tests/test_admin_browser.py, whose fixtures these are) plus a row of
each kind of object, so every list has rows to lay out."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest

from . import test_admin_browser as browser
from .test_admin_browser import browser_page, served_static  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.browser,
    pytest.mark.process,
    pytest.mark.vendor_independent,  # SQLite only, as tests/test_admin_browser.py
    pytest.mark.django_db(transaction=True),
]

#: What a list's layout is measured with: how far its table scrolls sideways (0: it fits),
#: and the widest cell's right edge against the content box's.
FIT = """() => {
    const table = document.querySelector('#result_list');
    if (!table) return {rows: 0, overflow: 0, cut: []};
    const box = table.parentElement;
    const right = box.getBoundingClientRect().right;
    const heads = [...table.querySelectorAll('thead th')];
    const cut = heads.filter(th => th.getBoundingClientRect().right > right + 1)
        .map(th => th.innerText.trim());
    return {
        rows: table.querySelectorAll('tbody tr').length,
        overflow: box.scrollWidth - box.clientWidth,
        cut: cut,
    };
}"""

#: Schedule names that wrap inside a word: a line break (the next character lower than the
#: one before it) anywhere but after a separator of a name (``.``, ``-``, ``_``, ``:``).
BROKEN_NAMES = """() => {
    const broken = [];
    const names = document.querySelectorAll(
        '#result_list .dds-name, #result_list td.field-schedule_link a');
    for (const el of names) {
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        const chars = [];
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (let i = 0; i < node.length; i++) {
                const range = document.createRange();
                range.setStart(node, i);
                range.setEnd(node, i + 1);
                const rect = range.getBoundingClientRect();
                if (rect.width) chars.push([node.data[i], rect.top]);
            }
        }
        for (let i = 1; i < chars.length; i++) {
            if (chars[i][1] > chars[i - 1][1] + 2 && !'.-_:'.includes(chars[i - 1][0])) {
                broken.push(el.textContent);
            }
        }
    }
    return broken;
}"""


def _more_rows() -> None:
    """A backfill, a group, a calendar, a blackout window and a notification, so their
    lists have a row each (the seed makes schedules, attempts, receipts and events)."""
    from django_durable_schedules import state
    from django_durable_schedules.models import (
        BlackoutWindow,
        ConcurrencyGroup,
        ExclusionCalendar,
        NotificationDelivery,
        Schedule,
        ScheduleEvent,
    )

    now = state.db_now()
    Schedule.objects.create(  # a long name: it wraps between its words, never inside one
        name="reports.quarterly-revenue-by-region-and-currency",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
    )
    ConcurrencyGroup.objects.create(name="reports-warehouse", max_running=2, rate="10/m")
    ExclusionCalendar.objects.create(name="french-public-holidays", holidays_country="FR")
    BlackoutWindow.objects.create(
        name="quarterly-maintenance-window",
        timezone="UTC",
        start_at=now + timedelta(days=3),
        end_at=now + timedelta(days=3, hours=4),
    )
    row = Schedule.objects.filter(kind="interval").order_by("name").first()
    state.request_backfill(row.pk, now - timedelta(seconds=200), now - timedelta(seconds=100))
    event = ScheduleEvent.objects.order_by("at").first()
    NotificationDelivery.objects.create(
        event=event,
        notifier="ops-webhook",
        schedule_name=event.schedule_name,
        action=event.action,
        status="abandoned",
        tries=3,
        next_try_at=now,
        last_error="HTTPError: 503 Service Unavailable from https://hooks.example.com/ops/alerts",
        created_at=now,
    )


def test_every_list_of_the_admin_fits_1280_px_with_the_sidebar_open(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    from django.contrib import admin

    browser._seed()
    _more_rows()
    page = browser_page
    base = served_static.url
    page.set_viewport_size({"width": 1280, "height": 900})
    lists = sorted(
        f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for model in admin.site._registry
        if model._meta.app_label == "durable_schedules"
    )
    assert len(lists) >= 7
    browser._login(page, base, lists[0])
    assert page.locator("#nav-sidebar").is_visible()
    measured = {}
    for url in lists:
        page.goto(f"{base}{url}")
        assert page.locator("#content").is_visible(), url
        measured[url] = page.evaluate(FIT)
        if os.environ.get("DDS_FIT_SHOTS"):
            page.screenshot(path=f"/tmp/fit-{url.strip('/').split('/')[-1]}.png", full_page=True)
    cut = {url: m for url, m in measured.items() if m["overflow"] > 0 or m["cut"]}
    assert not cut, f"cut off at 1280 px: {cut}"
    empty = [url for url, m in measured.items() if not m["rows"]]
    assert not empty, empty  # each list showed rows
    for url in ("schedule", "runattempt", "runreceipt", "scheduleevent"):
        page.goto(f"{base}/admin/durable_schedules/{url}/")
        assert page.evaluate(BROKEN_NAMES) == [], url


def test_the_add_form_shows_only_the_chosen_kinds_fields(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    """The add form showed every kind's timing fields at once (2,400 px tall at 1280 px);
    now each kind shows its own, the others appear when the kind changes (no reload), and
    a value typed into a field the new kind hides is not sent."""
    from playwright.sync_api import expect

    from django_durable_schedules.models import Schedule

    page = browser_page
    base = served_static.url
    page.set_viewport_size({"width": 1280, "height": 900})
    browser._login(page, base, "/admin/durable_schedules/schedule/add/")
    shown = {
        "interval": ("#id_interval_seconds", "#id_start_at", "#id_max_runs"),
        "cron": ("#id_cron", "#id_timezone", "#id_start_at", "#id_max_runs"),
        "rrule": ("#id_rrule", "#id_timezone", "#id_max_runs"),
        "once": ("#id_run_at", "#id_timezone"),
    }
    own = {"interval": "#id_interval_seconds", "cron": "#id_cron", "rrule": "#id_rrule"}
    own["once"] = "#id_run_at"
    heights = {}
    for kind, fields in shown.items():
        page.select_option("#id_kind", kind)
        for field in fields:
            expect(page.locator(field)).to_be_visible()
        for other, field in own.items():
            if other != kind:
                expect(page.locator(field)).to_be_hidden()
        heights[kind] = page.evaluate("document.documentElement.scrollHeight")
        if os.environ.get("DDS_FIT_SHOTS"):
            page.screenshot(path=f"/tmp/fit-add-{kind}.png", full_page=True)
    # A person starts with an interval, types one, then picks cron: the interval is not sent.
    page.fill("#id_name", "reports.nightly")
    page.select_option("#id_callback", "tests.noop")
    page.select_option("#id_kind", "interval")
    page.fill("#id_interval_seconds", "3600")
    page.select_option("#id_kind", "cron")
    page.fill("#id_cron", "30 2 * * *")
    page.click("input[name=_continue]")
    page.wait_for_url(lambda url: url.endswith("/change/"))
    made = Schedule.objects.get(name="reports.nightly")
    assert (made.kind, made.cron, made.interval_seconds) == ("cron", "30 2 * * *", None)
    # Each kind's form is shorter than the one that showed every field (2,400 px).
    assert max(heights.values()) < 2400, heights


def test_a_change_pages_latest_history_is_one_line_a_row_and_each_row_opens_its_page(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    """Each inline receipt row repeated its caption (the receipt's name and a "Change"
    link) above its cells, two lines a row; now the first cell links the row's page."""
    from django_durable_schedules.models import RunReceipt, Schedule

    browser._seed()
    page = browser_page
    base = served_static.url
    page.set_viewport_size({"width": 1280, "height": 900})
    flaky = Schedule.objects.get(name="partner.import")
    browser._login(page, base, f"/admin/durable_schedules/schedule/{flaky.pk}/change/")
    for group in ("receipts", "attempts"):  # (the seed writes no event for it)
        rows = page.locator(f"#{group}-group tbody tr.has_original")
        assert rows.count() > 0, group
        captions = page.locator(f"#{group}-group td.original p")
        assert all(not captions.nth(i).is_visible() for i in range(captions.count())), group
    first = page.locator("#receipts-group tbody tr.has_original").first
    if os.environ.get("DDS_FIT_SHOTS"):
        page.locator("#receipts-group").screenshot(path="/tmp/fit-inline.png")
    # One line: no taller than its tallest cell's text (two lines where a time is zoned).
    heights = first.evaluate(
        """row => ({
            row: row.getBoundingClientRect().height,
            line: parseFloat(getComputedStyle(row.querySelector('td')).lineHeight) || 18,
        })"""
    )
    assert heights["row"] < 3.2 * heights["line"], heights
    label = first.locator("td.field-run a").inner_text()
    first.locator("td.field-run a").click()
    page.wait_for_url(lambda url: "/runreceipt/" in url and url.endswith("/change/"))
    receipt = RunReceipt.objects.get(pk=page.url.rstrip("/").split("/")[-2])
    assert label == f"#{receipt.occurrence}.{receipt.attempt.attempt}"
    assert receipt.schedule_id == flaky.pk


def test_a_rules_words_follow_the_start_typed_on_the_form(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    """Issue #31 item 7: a rule's words ignored a start_at typed on the same form."""
    from playwright.sync_api import expect

    page = browser_page
    base = served_static.url
    browser._login(page, base, "/admin/durable_schedules/schedule/add/")
    page.select_option("#id_kind", "rrule")
    page.fill("#id_timezone", "Europe/Paris")
    page.fill("#id_start_at", "2027-06-01T09:30:00")
    page.fill("#id_rrule", "FREQ=WEEKLY;BYDAY=TU")
    words = page.locator("#id_rrule_words")
    expect(words).to_have_text("every week on Tuesday at 09:30")
    page.fill("#id_start_at", "2027-06-01T18:05:00")
    expect(words).to_have_text("every week on Tuesday at 18:05")


def test_an_instant_is_said_in_utc_as_it_is_typed(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    """Issue #31 item 7: the zone help under run_at updated only after a save."""
    from playwright.sync_api import expect

    page = browser_page
    base = served_static.url
    browser._login(page, base, "/admin/durable_schedules/schedule/add/")
    page.select_option("#id_kind", "once")
    page.fill("#id_timezone", "Asia/Tokyo")
    page.fill("#id_run_at", "2027-06-01T09:00:00")
    typed = page.locator(".field-run_at .dds-instant-typed")
    expect(typed).to_have_text("As typed: 2027-06-01 09:00:00 JST = 2027-06-01 00:00:00 UTC")
    page.fill("#id_timezone", "Europe/Paris")  # the zone changes: said again
    expect(typed).to_have_text("As typed: 2027-06-01 09:00:00 CEST = 2027-06-01 07:00:00 UTC")
    # The help under the field never contradicts it: it named the zone the page was drawn
    # with ("now UTC") whatever was typed since (a newcomer's trial).
    help_text = page.locator(".field-run_at .help").inner_text()
    assert "now UTC" not in help_text and "Timezone field" in help_text, help_text
