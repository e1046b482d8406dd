"""The admin timeline in a real browser (issue #29, item 1): real runs from a real
``run_scheduler --once`` next to a seeded history and a run in flight; a person opens the
timeline at 1280 px from the schedule list, hovers a bar (its tooltip and highlight), clicks
it and lands on its receipt, opens another bar from the keyboard, switches the range,
filters by callback and asks for the runs as a text table; at 1920 px the plot takes the extra width and its bars still open their
receipt, and the running bar its attempt. With ``DDS_SCREENSHOTS=1`` it saves
``docs/img/admin-timeline-1280.png``, ``admin-timeline-1280-dark.png``,
``admin-timeline-1920.png`` and ``admin-timeline-1920-dark.png``. Fixtures:
tests/test_admin_browser.py.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest

from .test_admin_browser import _login, _shot, browser_page, served_static  # noqa: F401
from .test_timeline import history, make

pytestmark = [
    pytest.mark.browser,
    pytest.mark.process,
    pytest.mark.vendor_independent,  # SQLite only, as tests/test_admin_browser.py
    pytest.mark.django_db(transaction=True),
]

TIMELINE = "/admin/durable_schedules/schedule/timeline/"

#: The plot's geometry as a person sees it: the widest plot's width, how far the page
#: scrolls sideways, and the space left right of the table inside the content box.
LAYOUT = """() => {
    const plots = [...document.querySelectorAll('tr.dds-tl-row td.dds-tl-plot > svg')];
    const content = document.querySelector('#content-main').getBoundingClientRect();
    const table = document.querySelector('table.dds-tl').getBoundingClientRect();
    return {
        plot: Math.max(...plots.map(p => p.getBoundingClientRect().width)),
        scroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        inner: document.querySelector('.dds-tl-scroll').scrollWidth
            - document.querySelector('.dds-tl-scroll').clientWidth,
        emptyRight: content.right - table.right,
        content: content.width,
    };
}"""


def _in_flight(name: str, minutes: int):
    """A run of ``name`` in flight for ``minutes``: an attempt holding the schedule's lease,
    no receipt yet (as a worker's claim leaves it)."""
    from django.db.models import Max

    from django_durable_schedules import state
    from django_durable_schedules.models import RunAttempt, Schedule

    schedule = Schedule.objects.get(name=name)
    now, token = state.db_now(), uuid.uuid4()
    last = RunAttempt.objects.filter(schedule=schedule).aggregate(n=Max("occurrence"))["n"] or 0
    attempt = RunAttempt.objects.create(
        schedule=schedule, schedule_name=name, occurrence=last + 1, attempt=1,
        scheduled_for=now - timedelta(minutes=minutes), claimed_at=now - timedelta(minutes=minutes),
        lease_token=token, lease_expires_at=now + timedelta(minutes=5), worker="host-2:5151",
        idempotency_key=f"{schedule.pk}:in-flight",
    )  # fmt: skip
    Schedule.objects.filter(pk=schedule.pk).update(
        lease_token=token, lease_expires_at=now + timedelta(minutes=5)
    )
    return attempt


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
    running = _in_flight("digest.build", minutes=40)

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
    at_1280 = page.evaluate(LAYOUT)
    assert at_1280["scroll"] <= 0 and at_1280["inner"] <= 0, at_1280
    assert at_1280["plot"] >= 720, at_1280  # never narrower than the geometry's width

    # The run in flight: a running bar to "now", its words in its tooltip and under the name.
    flying = page.locator(f'a.dds-tl-running-link[data-attempt="{running.pk}"]')
    assert re.fullmatch(
        r"running since \S+ \S+ UTC · 40 min \d\d s so far · scheduled · on host-2:5151",
        flying.locator("title").text_content(),
    )
    assert "running since" in page.locator("tr[data-schedule='digest.build'] th").inner_text()
    box = flying.locator("rect").bounding_box()
    now_line = page.locator("tr[data-schedule='digest.build'] line.dds-tl-now").bounding_box()
    assert abs(box["x"] + box["width"] - now_line["x"]) < 3 and box["width"] > 10, (box, now_line)

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

    # The runs as a text table, on request: a link under the drawing (no script), reached
    # from the keyboard; each run's outcome opens its receipt.
    page.goto(f"{base}{TIMELINE}")
    assert page.locator("#dds-tl-runs table").count() == 0
    page.locator("a.dds-tl-table-link").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"\?table=1#dds-tl-runs$"))
    runs_table = page.locator("#dds-tl-runs table")
    assert runs_table.locator("tbody tr").count() >= 30
    assert "running" in runs_table.locator("tr", has_text="digest.build").last.inner_text()
    runs_table.locator(f'a[href$="/runreceipt/{real_bad.pk}/change/"]').click()
    page.wait_for_url(re.compile(rf"/runreceipt/{real_bad.pk}/change/$"))
    page.go_back()
    page.get_by_role("link", name="hide the table").click()
    page.wait_for_load_state()
    assert page.locator("#dds-tl-runs table").count() == 0

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

    # 1920 px, dark then light: the plot takes the extra width (no empty half, nothing to
    # scroll), and its bars still open their receipt, the running one its attempt.
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{base}{TIMELINE}")
    _shot(page, "admin-timeline-1920-dark.png", full_page=False)
    page.emulate_media(color_scheme="light")
    page.goto(f"{base}{TIMELINE}")
    at_1920 = page.evaluate(LAYOUT)
    assert at_1920["scroll"] <= 0 and at_1920["inner"] <= 0, at_1920
    assert at_1920["plot"] >= at_1280["plot"] + 500, (at_1280, at_1920)
    assert at_1920["emptyRight"] <= 2, at_1920  # the table reaches the content's right edge
    assert at_1920["plot"] >= 0.7 * at_1920["content"], at_1920
    # The bars grew with the plot; text did not (no stretched viewBox).
    bar = page.locator(f'a[data-receipt="{real_ok.pk}"] rect.dds-tl-bar')
    label = page.locator("text.dds-tl-label").first.bounding_box()
    assert label["height"] < 16, label
    bar.hover()
    assert bar.evaluate("r => getComputedStyle(r).strokeWidth") == "2px"
    _shot(page, "admin-timeline-1920.png", full_page=False)
    bar.click()
    page.wait_for_url(re.compile(rf"/runreceipt/{real_ok.pk}/change/$"))
    page.go_back()
    page.locator(f'a.dds-tl-running-link[data-attempt="{running.pk}"] rect').click()
    page.wait_for_url(re.compile(rf"/runattempt/{running.pk}/change/$"))
    assert "host-2:5151" in page.locator("#content").inner_text()
