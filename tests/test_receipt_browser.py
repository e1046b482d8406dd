"""A failed run's traceback and duration in a real browser (issue 26, item 3): a real
``run_scheduler --once`` runs a callback that fails; a person opens the schedule in the
admin, clicks its failed outcome and reads the traceback (never the secret a local variable
of the failing frame held) and how long the run took. Fixtures: tests/test_admin_browser.py.
"""

from __future__ import annotations

import re

import pytest

from .test_admin_browser import browser_page, served_static  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.browser,
    pytest.mark.process,
    pytest.mark.vendor_independent,  # SQLite only, as tests/test_admin_browser.py
    pytest.mark.django_db(transaction=True),
]


def test_a_failed_receipt_opened_from_its_schedule_shows_traceback_and_duration(
    served_static,  # noqa: F811
    start_worker,
    browser_page,  # noqa: F811
):
    from django_durable_schedules.models import RunReceipt, Schedule
    from tests.testapp.schedules import LEAKY_SECRET

    schedule = Schedule.objects.create(
        name="billing.charge",
        callback="tests.leaky_fail",
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
        max_attempts=1,
    )
    worker = start_worker("--once", "--worker-id", "browser-receipts")
    assert worker.wait(90) == 0, worker.output()
    receipt = RunReceipt.objects.get(schedule=schedule)
    assert receipt.status == "failed" and receipt.traceback

    page = browser_page
    base = served_static.url
    page.goto(f"{base}/admin/login/?next=/admin/durable_schedules/schedule/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "password")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/durable_schedules/schedule/$"))

    # The list, then the schedule's page, then its failed outcome, by clicking.
    page.get_by_role("link", name="billing.charge").click()
    page.wait_for_url(re.compile(r"/schedule/[^/]+/change/$"))
    page.locator(".dds-strip a.dds-o-failed").first.click()
    page.wait_for_url(re.compile(r"/runreceipt/[^/]+/change/$"))

    traceback = page.locator("pre.dds-traceback").inner_text()
    assert traceback.startswith("Traceback (most recent call last):")
    assert re.search(r'File ".*tests/testapp/schedules\.py", line \d+, in leaky_fail', traceback)
    assert re.search(r"line \d+, in charge_card\s+KeyError: amount$", traceback)
    duration = page.locator(".field-duration .readonly").inner_text()
    assert re.fullmatch(r"\d+\.\d{3} s", duration), duration
    started = page.locator(".field-started .readonly").inner_text()
    assert "UTC" in started
    assert LEAKY_SECRET not in page.content() and "hunter2" not in page.content()
