"""An ``overlap_policy="allow"`` schedule running two occurrences at once, in a real
browser (issue #28 item 4): at 1280 px with the navigation sidebar open, a person reads on
the schedule list that it runs, how many of how many occurrences, and since when the
oldest runs on which worker; the row's own lease is empty while they run.

Fixtures: tests/test_admin_browser.py (skipped without Chromium and Playwright; SQLite
only: vendor_independent).
"""

from __future__ import annotations

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


def test_a_person_sees_the_running_occurrences_on_the_list_at_1280_px(
    served_static,  # noqa: F811
    browser_page,  # noqa: F811
):
    from django.utils import timezone

    from django_durable_schedules import state
    from django_durable_schedules.models import RunAttempt, Schedule

    par = Schedule.objects.create(
        name="exports.parallel",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
        max_attempts=1,
        overlap_policy="allow",
        max_parallel=3,
        start_at=timezone.now() + timedelta(hours=1),
    )
    Schedule.objects.create(
        name="sessions.clear", callback="tests.noop", kind="cron", cron="0 * * * *"
    )
    for _ in range(2):
        state.trigger(par.pk)
        assert [c.schedule_id for c in state.claim_due(worker="host-1:4242")] == [par.pk]
    oldest = RunAttempt.objects.filter(schedule=par).order_by("claimed_at", "pk").first()
    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, served_static.url, "/admin/durable_schedules/schedule/")
    assert page.locator("#nav-sidebar").is_visible()
    row = page.locator("#result_list tbody tr", has_text="exports.parallel")
    badge = row.locator(".dds-s-running")
    sync_api.expect(badge).to_have_text("running")
    since = row.locator(".dds-running-since")
    sync_api.expect(since).to_contain_text(
        f"2 of 3 occurrences; oldest #{oldest.occurrence}.1 since {oldest.claimed_at:%H:%M:%S} UTC on host-1:4242"
    )
    # Both in view, inside the list's box: nothing to scroll to, nothing cut off.
    box = page.evaluate(
        """() => {
            const table = document.querySelector('#result_list');
            const box = table.parentElement;
            const badge = table.querySelector('.dds-s-running');
            return {
                overflow: box.scrollWidth - box.clientWidth,
                right: badge.getBoundingClientRect().right,
                boxRight: box.getBoundingClientRect().right,
            };
        }"""
    )
    assert box["overflow"] <= 0 and box["right"] <= box["boxRight"], box
    assert badge.is_visible() and since.is_visible()
    other = page.locator("#result_list tbody tr", has_text="sessions.clear")
    assert other.locator(".dds-s-running").count() == 0
