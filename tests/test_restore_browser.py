"""Restoring an earlier definition in a real browser (issue #29, item 3): a person opens a
schedule's change page, clicks "Compare" on an older version in "History of the
definition", reads what differs, clicks "Restore this version…", confirms, and lands on the
change page with the success message; the schedule holds the old definition, no run was
fired. Fixtures: tests/test_admin_browser.py (Debian's Chromium, headless)."""

from __future__ import annotations

import re

import pytest

from .test_admin_browser import _login, browser_page, served_static  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.browser,
    pytest.mark.process,
    pytest.mark.vendor_independent,  # SQLite only, as tests/test_admin_browser.py
    pytest.mark.django_db(transaction=True),
]


def test_compare_then_restore_an_older_version_in_a_real_browser(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    from django_durable_schedules import state
    from django_durable_schedules.models import RunAttempt, Schedule, ScheduleEvent

    row = state.create_schedule(
        name="reports.nightly",
        callback="tests.noop",
        kind="cron",
        cron="30 2 * * *",
        timezone="Europe/Paris",
    )
    state.update_schedule(row.pk, cron="0 6 * * *", payload={"full": True}, source="api")
    created = ScheduleEvent.objects.get(schedule_id=row.pk, action="created")
    page, base = browser_page, served_static.url
    change = f"/admin/durable_schedules/schedule/{row.pk}/change/"
    _login(page, base, change)

    history = page.locator("#dds-versions")
    assert "History of the definition" in history.inner_text()
    assert history.locator("tbody tr").count() == 2
    older = history.locator(f"tr[data-dds-version='{created.pk}']")
    older.get_by_role("link", name="Compare").click()
    page.wait_for_url(re.compile(rf"/versions/{created.pk}/$"))
    cron = page.locator("tr[data-dds-field='cron']").inner_text()
    assert "0 6 * * *" in cron and "30 2 * * *" in cron
    assert "payload" in page.locator("table.dds-diff-table").inner_text()

    page.get_by_role("link", name="Restore this version…").click()
    page.wait_for_url(re.compile(r"/restore/$"))
    assert "No run is fired" in page.locator("#content").inner_text()
    page.click("input[value='Yes, restore this version']")
    page.wait_for_url(re.compile(re.escape(change) + "$"))
    message = page.locator("ul.messagelist li.success").inner_text()
    assert "The definition of reports.nightly was restored" in message

    restored = Schedule.objects.get(pk=row.pk)
    assert (restored.cron, restored.payload) == ("30 2 * * *", {})
    assert not RunAttempt.objects.filter(schedule_id=row.pk).exists()
    # The change page now lists three versions, the newest a restore.
    assert page.locator("#dds-versions tbody tr").count() == 3
    assert "(a restore)" in page.locator("#dds-versions tbody tr").first.inner_text()
