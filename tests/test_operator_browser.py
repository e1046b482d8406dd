"""Issue #27's operator controls in a real browser: what a person clicks and then sees.

- A blackout window added with its admin form and linked to a schedule on the schedule's
  change page: the page's upcoming list strikes the slots inside it through, with its name.
- "Pause selected schedules…" from the list for an incident: one note for every schedule
  selected, then each row shows it paused with that note.

Fixtures: tests/test_admin_browser.py (skipped without Chromium and Playwright; SQLite only: vendor_independent).
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from .test_admin_browser import _login, browser_page, served_static  # noqa: F401 - fixtures

sync_api = pytest.importorskip("playwright.sync_api")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.process,
    pytest.mark.vendor_independent,  # SQLite only, as tests/test_admin_browser.py
    pytest.mark.django_db(transaction=True),
]


def test_a_blackout_window_added_and_linked_strikes_its_slots_through_in_a_real_browser(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    """A person adds a one-off window covering the next hour (its admin form), opens an
    every-10-minutes schedule, moves the window into "Chosen blackout windows", saves, and
    the page lists the slots inside the window struck through as "not run: blackout window
    db-maintenance"; the window's list says one schedule names it."""
    from django_durable_schedules import state
    from django_durable_schedules.models import BlackoutWindow, Schedule

    now = state.db_now().replace(microsecond=0)
    s = Schedule.objects.create(
        name="reports.refresh",
        callback="tests.noop",
        kind="interval",
        interval_seconds=600,
        start_at=now - timedelta(seconds=30),
    )
    page = browser_page
    base = served_static.url
    windows = "/admin/durable_schedules/blackoutwindow/"
    _login(page, base, f"{windows}add/")
    start, end = now + timedelta(minutes=15), now + timedelta(minutes=75)
    page.fill("#id_name", "db-maintenance")
    page.fill("#id_start_at_0", f"{start:%Y-%m-%d}")
    page.fill("#id_start_at_1", f"{start:%H:%M:%S}")
    page.fill("#id_end_at_0", f"{end:%Y-%m-%d}")
    page.fill("#id_end_at_1", f"{end:%H:%M:%S}")
    page.click("input[name=_save]")
    page.wait_for_url(re.compile(re.escape(windows) + "$"))
    row = page.locator("#result_list tbody tr", has_text="db-maintenance")
    assert "0" in row.locator("td.field-used_by").inner_text()
    window = BlackoutWindow.objects.get(name="db-maintenance")
    assert (window.start_at, window.end_at) == (start, end)

    change = f"/admin/durable_schedules/schedule/{s.pk}/change/"
    page.goto(f"{base}{change}")
    page.select_option("#id_blackout_windows_from", label="db-maintenance")
    page.click("#id_blackout_windows_add")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(re.escape(change) + "$"))
    assert "was changed successfully" in page.locator("ul.messagelist").inner_text()
    struck = page.locator("table.dds-upcoming tr.dds-excluded")
    sync_api.expect(struck.first).to_contain_text("not run: blackout window db-maintenance")
    # Slots every 10 minutes from now-30 s. The first slot inside the window is listed
    # struck through; the list steps over the rest of the window (one row per window) and
    # goes on with the first slot at or after its end, numbered.
    slots = [s.start_at + timedelta(seconds=600 * k) for k in range(1, 14)]
    inside = [t for t in slots if start <= t < end]
    after = next(t for t in slots if t >= end)
    assert struck.count() == 1 and len(inside) == 6
    assert f"{inside[0]:%H:%M:%S}" in struck.first.inner_text()
    rows = page.locator("table.dds-upcoming tbody tr").all_inner_texts()
    index = next(i for i, text in enumerate(rows) if "not run" in text)
    assert f"{after:%H:%M:%S}" in rows[index + 1] and "not run" not in rows[index + 1]
    assert not any(f"{t:%H:%M:%S}" in text for t in inside[1:] for text in rows)
    first_run = rows[0]
    assert f"{slots[0]:%H:%M:%S}" in first_run and "not run" not in first_run
    assert list(s.blackout_windows.values_list("name", flat=True)) == ["db-maintenance"]

    page.goto(f"{base}{windows}")
    row = page.locator("#result_list tbody tr", has_text="db-maintenance")
    assert row.locator("td.field-used_by").inner_text().strip() == "1"


def test_pause_selected_schedules_with_one_note_in_a_real_browser(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    """An incident: a person ticks two schedules in the list, picks "Pause selected
    schedules…", writes one note, confirms, and both rows then read paused with the note;
    the third, unticked, is still active."""
    from django_durable_schedules.models import Schedule

    for name in ("partner.import", "partner.export", "sessions.clear"):
        Schedule.objects.create(name=name, callback="tests.noop", kind="cron", cron="0 * * * *")
    page = browser_page
    base = served_static.url
    changelist = "/admin/durable_schedules/schedule/"
    _login(page, base, changelist)
    for name in ("partner.import", "partner.export"):
        page.locator("#result_list tbody tr", has_text=name).locator("input.action-select").check()
    page.select_option("select[name=action]", label="Pause selected schedules…")
    page.click("button[name=index]")
    sync_api.expect(page.locator("#content h1")).to_contain_text("Pause 2 schedules")
    page.fill("#id_note", "INC-77: partner outage")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(re.escape(changelist) + r"(\?.*)?$"))
    message = page.locator("ul.messagelist li.success").inner_text()
    assert "Paused 2 schedules until enabled" in message
    for name in ("partner.import", "partner.export"):
        row = page.locator("#result_list tbody tr", has_text=name).inner_text()
        assert "paused" in row and "INC-77: partner outage" in row
    other = page.locator("#result_list tbody tr", has_text="sessions.clear").inner_text()
    assert "paused" not in other
    assert dict(Schedule.objects.values_list("name", "pause_reason")) == {
        "partner.import": "INC-77: partner outage",
        "partner.export": "INC-77: partner outage",
        "sessions.clear": "",
    }
