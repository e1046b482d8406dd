"""The admin timeline in a real browser (issue #29, item 1): real runs from a real
``run_scheduler --once`` next to a seeded history; a person opens the timeline at 1280 px
from the schedule list, hovers a bar (its tooltip and highlight), clicks it and lands on its
receipt, opens another bar from the keyboard, switches the range and filters by callback.
With ``DDS_SCREENSHOTS=1`` it saves ``docs/img/admin-timeline-1280.png`` and
``admin-timeline-1280-dark.png``. Fixtures: tests/test_admin_browser.py.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from .test_admin_browser import _login, _shot, browser_page, served_static  # noqa: F401
from .test_timeline import history, make

pytestmark = [pytest.mark.browser, pytest.mark.process, pytest.mark.django_db(transaction=True)]

TIMELINE = "/admin/durable_schedules/schedule/timeline/"


def _seed() -> None:
    """A seeded history next to the real runs: outcomes, retries, a backfill, a trigger."""
    s, f, k = ("succeeded", "scheduled", 1), ("failed", "scheduled", 1), ("skipped", "scheduled", 1)
    digest = make("digest.build", callback="tests.echo", interval_seconds=900)
    history(digest, [s, s, k, s, s, ("succeeded", "triggered", 1), s, s, k, s] * 4,
            every=timedelta(hours=3))  # fmt: skip
    partner = make("partner.import", callback="tests.fail", interval_seconds=3600)
    history(partner, [s, s, f, ("succeeded", "scheduled", 2), s, f, ("failed", "scheduled", 2),
                      ("lease_expired", "scheduled", 3), s, s] * 2)  # fmt: skip
    archive = make("archive.rebuild", callback="tests.echo", interval_seconds=6 * 3600)
    history(archive, [("succeeded", "backfill", 1)] * 6 + [s, ("released", "scheduled", 1)],
            every=timedelta(hours=2))  # fmt: skip


def test_the_timeline_in_a_real_browser(served_static, start_worker, browser_page):  # noqa: F811
    from django_durable_schedules.models import RunReceipt, Schedule

    # Real runs: two schedules due now, one pass of a real worker.
    ok = Schedule.objects.create(
        name="reports.hourly", callback="tests.echo", kind="interval", interval_seconds=3600,
        timezone="UTC",
    )  # fmt: skip
    bad = Schedule.objects.create(
        name="billing.sync", callback="tests.fail", kind="interval", interval_seconds=3600,
        timezone="UTC", max_attempts=1,
    )  # fmt: skip
    worker = start_worker("--once", "--worker-id", "browser-timeline")
    assert worker.wait(90) == 0, worker.output()
    real_ok = RunReceipt.objects.get(schedule=ok)
    real_bad = RunReceipt.objects.get(schedule=bad)
    assert (real_ok.status, real_bad.status) == ("succeeded", "failed")
    _seed()

    page = browser_page
    page.set_viewport_size({"width": 1280, "height": 900})
    base = served_static.url
    _login(page, base, "/admin/durable_schedules/schedule/")

    # From the list's object tools to the timeline.
    page.get_by_role("link", name="Timeline").click()
    page.wait_for_url(re.compile(re.escape(TIMELINE) + "$"))
    rows = page.locator("tr.dds-tl-row")
    assert rows.count() == 5
    assert [n.strip() for n in rows.locator("th > a:first-child").all_inner_texts()] == [
        "archive.rebuild", "billing.sync", "digest.build", "partner.import", "reports.hourly",
    ]  # fmt: skip
    assert page.locator("svg.dds-tl-band rect.dds-tl-col-runs").count() > 5
    # Every plot fits the window at 1280 px: nothing to scroll sideways.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280

    # Hover the real success: its tooltip names status, start, duration and origin, and
    # the bar is outlined.
    bar = page.locator(f'a[data-receipt="{real_ok.pk}"]')
    bar.locator("rect.dds-tl-bar").hover()
    title = bar.locator("title").text_content()
    assert re.fullmatch(r"succeeded · started \S+ \S+ UTC · [\d.]+ s · scheduled", title), title
    stroke = bar.locator("rect.dds-tl-bar").evaluate("r => getComputedStyle(r).strokeWidth")
    assert stroke == "2px"
    _shot(page, "admin-timeline-1280.png", full_page=False)

    # Click it: its receipt.
    bar.locator("rect.dds-tl-bar").click()
    page.wait_for_url(re.compile(rf"/runreceipt/{real_ok.pk}/change/$"))
    assert "succeeded" in page.locator("#content").inner_text()
    page.go_back()

    # The failed real run, from the keyboard: focus its bar, Enter.
    page.locator(f'a[data-receipt="{real_bad.pk}"]').focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(rf"/runreceipt/{real_bad.pk}/change/$"))
    page.go_back()

    # Retries, the backfill and the trigger are told apart.
    assert page.locator("tr[data-schedule='partner.import'] rect.dds-tl-m-retry").count() == 6
    assert (
        page.locator("tr[data-schedule='archive.rebuild'] rect[fill='url(#dds-tl-hatch)']").count()
        == 6
    )
    assert page.locator("tr[data-schedule='digest.build'] rect.dds-tl-m-triggered").count() >= 1

    # Switch the range: 7 days shows digest.build's older runs too.
    before = int(page.locator("tr[data-schedule='digest.build']").get_attribute("data-runs") or 0)
    page.locator("a.dds-tl-range[data-range='7d']").click()
    page.wait_for_url(re.compile(r"range=7d"))
    assert page.locator("a.dds-tl-range[data-range='7d']").get_attribute("aria-current") == "true"
    after = int(page.locator("tr[data-schedule='digest.build']").get_attribute("data-runs") or 0)
    assert after == 40 and before < after

    # Filter by callback, keeping the range.
    page.select_option("select[name=callback]", "tests.fail")
    page.get_by_role("button", name="Show").click()
    page.wait_for_load_state()
    names = [n.strip() for n in page.locator("tr.dds-tl-row th > a:first-child").all_inner_texts()]
    assert names == ["billing.sync", "partner.import"]

    # A bad range is a message, not an error page.
    page.goto(f"{base}{TIMELINE}?start=yesterday&end=today")
    assert "is not an ISO 8601" in page.locator("ul.messagelist").inner_text()
    assert page.locator("tr.dds-tl-row").count() == 5

    # Dark mode: the same page readable on the admin's dark theme.
    page.emulate_media(color_scheme="dark")
    page.goto(f"{base}{TIMELINE}")
    label = page.locator("table.dds-tl th a").first
    color = label.evaluate("a => getComputedStyle(a).color")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert color != background
    _shot(page, "admin-timeline-1280-dark.png", full_page=False)
