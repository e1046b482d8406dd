"""The admin in a real browser: Playwright driving Debian's Chromium, headless.

Logs in, creates a cron schedule with the add form, triggers it from the list, runs a real
``run_scheduler --once``, and sees its receipt in the outcome strip, the next five fire
times on the change page and the health page. With ``DDS_SCREENSHOTS=1`` it saves the
screenshots used by ``docs/admin.md`` under ``docs/img/``.

Needs ``apt-get install chromium`` and ``pip install playwright`` (never ``playwright
install``: the browser is Debian's); skipped when either is missing.
"""

from __future__ import annotations

import os
import re
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from .conftest import wait_until

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[1] / "docs" / "img"

sync_api = pytest.importorskip("playwright.sync_api")
if not CHROMIUM.exists():  # pragma: no cover - depends on the machine
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)
# vendor_independent: the pages are the same HTML on every database, and every state
# function behind them runs on all three in their own tests: the browser drives the admin
# once, on SQLite, to keep the suite's time (tests/conftest.py deselects it elsewhere).
pytestmark = [pytest.mark.browser, pytest.mark.process, pytest.mark.vendor_independent]


# ---------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------


@pytest.fixture
def served_static(live_server, settings):
    """Serve the admin's CSS (and this app's) from the live server through the staticfiles
    finders, so the pages and screenshots look as they do in a real project, even when the
    test settings do not install ``django.contrib.staticfiles``."""
    from django.contrib.staticfiles.handlers import StaticFilesHandler
    from django.core.handlers.wsgi import WSGIHandler

    settings.STATIC_URL = "/static/"
    httpd = live_server.thread.httpd
    original = httpd.get_app()
    httpd.set_app(StaticFilesHandler(WSGIHandler()))
    yield live_server
    httpd.set_app(original)


@pytest.fixture
def browser_page(admin_user, monkeypatch):
    # Playwright's sync API keeps an event loop open in this thread while it runs; the
    # test's own ORM calls are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        try:
            yield page
        finally:
            context.close()
            browser.close()
            # While Playwright's loop runs, Django keeps this thread's connections apart
            # (asgiref's async-context storage): close them here, or the test database
            # cannot be dropped at the end of the session.
            from django.db import connections

            connections.close_all()


def _shot(page, name: str, *, full_page: bool = True) -> None:
    if os.environ.get("DDS_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / name), full_page=full_page)


def _shot_element(locator, name: str) -> None:
    if os.environ.get("DDS_SCREENSHOTS") == "1":
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        locator.screenshot(path=str(SCREENSHOTS / name))


def _seed() -> None:
    """A few schedules with a history, and two live workers, so the pages show something."""
    from django_durable_schedules import state
    from django_durable_schedules.models import (
        RunAttempt,
        RunReceipt,
        Schedule,
        Status,
        WorkerHeartbeat,
    )

    now = state.db_now()

    def schedule(name, callback="tests.noop", **kw):
        fields = {"kind": "interval", "interval_seconds": 600, "timezone": "UTC"}
        fields.update(kw)
        # Anchored a while ago, so an interval's next slot is in the future (not due now; a
        # new interval without start_at would be due at once, R4).
        if fields["kind"] == "interval":
            fields["start_at"] = now - timedelta(seconds=190)
        return Schedule.objects.create(
            name=name, callback=callback, created_at=now - timedelta(seconds=190), **fields
        )

    def history(s, outcomes: str):
        letters = {
            "s": "succeeded",
            "f": "failed",
            "k": "skipped",
            "m": "missed",
            "e": "lease_expired",
            "r": "released",
        }
        attempts, receipts = [], []
        for i, letter in enumerate(outcomes, 1):
            status = letters[letter]
            at = now - timedelta(minutes=10 * (len(outcomes) - i + 1))
            attempt = RunAttempt(
                id=uuid.uuid4(),
                schedule=s,
                schedule_name=s.name,
                occurrence=i,
                attempt=1,
                scheduled_for=at,
                claimed_at=at,
                lease_token=uuid.uuid4(),
                lease_expires_at=at + timedelta(seconds=30),
                worker="web-1:4127",
                idempotency_key=f"{s.pk}:{i}",
            )
            attempts.append(attempt)
            receipts.append(
                RunReceipt(
                    attempt=attempt,
                    schedule=s,
                    occurrence=i,
                    succeeded_occurrence=i if status == "succeeded" else None,
                    status=status,
                    finished_at=at + timedelta(seconds=2),
                    error_type="HTTPError" if status == "failed" else "",
                    error_message="partner API answered 503" if status == "failed" else "",
                )
            )
        RunAttempt.objects.bulk_create(attempts)
        RunReceipt.objects.bulk_create(receipts)
        Schedule.objects.filter(pk=s.pk).update(occurrence=len(outcomes))

    history(schedule("digest.build", "tests.echo", interval_seconds=900), "sssskssskksssskssssk")
    flaky = schedule("partner.import", "tests.fail", interval_seconds=600)
    history(flaky, "sssfssssfsssssssfsff")
    Schedule.objects.filter(pk=flaky.pk).update(failure_count=2)
    history(schedule("sessions.clear_expired", interval_seconds=3600), "sssssssssessssssssss")
    history(
        schedule(
            "billing.monthly",
            kind="cron",
            interval_seconds=None,
            cron="0 6 1 * *",
            timezone="America/New_York",
        ),
        "ssmsss",
    )
    paused = schedule("exports.weekly", kind="cron", interval_seconds=None, cron="0 4 * * 1")
    history(paused, "sssrs")
    state.disable(paused.pk)
    lost = schedule("legacy.sync", "legacy.sync", interval_seconds=300)  # not registered
    history(lost, "sssssf")
    Schedule.objects.filter(pk=lost.pk).update(
        status=Status.PAUSED,
        next_run_at=None,
        degraded_reason="callback 'legacy.sync' is not registered in this deployment",
    )
    for worker_id, host, pid, skew in (
        ("web-1:4127", "web-1", 4127, 0.042),
        ("web-2:877", "web-2", 877, -0.31),
    ):
        WorkerHeartbeat.objects.create(
            worker_id=worker_id,
            hostname=host,
            pid=pid,
            started_at=now - timedelta(hours=3),
            last_seen_at=now,
            in_flight=0,
            runs_finished=1234 if pid == 4127 else 1187,
            clock_skew_seconds=skew,
        )


# ---------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------


def test_admin_in_a_real_browser(served_static, start_worker, browser_page):
    from django_durable_schedules.models import RunReceipt, Schedule

    _seed()
    page = browser_page
    base = served_static.url

    # Log in.
    _login(page, base, "/admin/durable_schedules/schedule/")
    assert page.locator("#result_list .dds-strip").count() == 6
    page.click("#toggle-nav-sidebar")  # more room for the list (remembered by the browser)

    # Create a cron schedule with the add form (callback: a choice of registered names).
    page.goto(f"{base}/admin/durable_schedules/schedule/add/")
    _fill_cron_form(page, "reports.nightly", "30 2 * * *", "Europe/Paris")
    page.click("input[name=_save]")
    page.wait_for_url(re.compile(r"/admin/durable_schedules/schedule/$"))
    assert "was added successfully" in page.locator("ul.messagelist").inner_text()
    schedule = Schedule.objects.get(name="reports.nightly")
    assert schedule.kind == "cron" and schedule.next_run_at is not None

    # Trigger it with the list action.
    row = page.locator(
        "#result_list tbody tr", has=page.get_by_role("link", name="reports.nightly")
    )
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "trigger")
    page.click("button[name=index]")
    page.wait_for_load_state()
    message = page.locator("ul.messagelist li.success").inner_text()
    assert "Triggered 1 schedule: reports.nightly" in message

    # A real worker pass runs it.
    worker = start_worker("--once", "--worker-id", "browser-test")
    assert worker.wait(90) == 0, worker.output()
    receipt = RunReceipt.objects.get(schedule_id=schedule.pk)
    assert receipt.status == "succeeded"

    # The list shows the receipt in the strip and as the last outcome.
    page.goto(f"{base}/admin/durable_schedules/schedule/")
    row = page.locator(
        "#result_list tbody tr", has=page.get_by_role("link", name="reports.nightly")
    )
    assert row.locator(".dds-strip a.dds-o-succeeded").count() == 1
    assert "succeeded" in row.locator("td.field-outcomes_summary .dds-last").inner_text()
    title = row.locator(".dds-strip a.dds-o-succeeded").get_attribute("title")
    assert title.startswith("#1 succeeded · ")
    cadence = row.locator("td.field-cadence_and_next_run").inner_text()
    assert "cron '30 2 * * *' (Europe/Paris)" in cadence and "At 02:30" in cadence
    _shot(page, "admin-changelist.png")

    # The change page: the next five fire times, in Paris and in UTC, and the receipt.
    row.get_by_role("link", name="reports.nightly").click()
    page.wait_for_url(re.compile(r"/change/$"))
    upcoming = page.locator("table.dds-upcoming tbody tr")
    assert upcoming.count() == 5
    for i in range(5):
        cells = upcoming.nth(i).locator("td").all_inner_texts()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d 02:30:00 CES?T", cells[1]), cells
        assert re.fullmatch(r"\d{4}-\d\d-\d\d 0[01]:30:00 UTC", cells[2]), cells
    assert "succeeded" in page.locator("#receipts-group").inner_text()
    assert page.locator("#attempts-group tbody tr.has_original").count() == 1
    # The last success, as the callback's ctx.previous: occurrence, slot, finish, result.
    previous = page.locator(".dds-previous").inner_text()
    assert "occurrence #1" in previous and "UTC" in previous, previous
    assert page.locator(".dds-previous-result").is_visible()
    assert page.locator("button.dds-tool", has_text="Trigger now").count() == 1
    _shot(page, "admin-change.png", full_page=False)  # the top: state, fire times, strip

    # The health page, from the change page's tools.
    page.click("a.dds-health-link")
    page.wait_for_url(re.compile(r"/health/$"))
    text = page.locator("#content-main").inner_text()
    assert "Unhealthy" in text  # the degraded schedule
    assert "web-1:4127" in text and "web-2:877" in text
    assert "partner.import" in text and "legacy.sync" in text
    page.get_by_role("link", name="partner.import").click()
    page.wait_for_url(re.compile(r"/change/$"))
    page.go_back()
    _shot(page, "admin-health.png")


def _fill_cron_form(page, name: str, cron: str, zone: str) -> None:
    """Fill the add form with a cron schedule of the test callback ``tests.echo``."""
    page.fill("#id_name", name)
    page.select_option("#id_callback", "tests.echo")
    page.select_option("#id_kind", "cron")  # hides the interval (emptied when saved)
    page.fill("#id_cron", cron)
    page.fill("#id_timezone", zone)


def test_tutorial_failing_schedule_in_a_real_browser(served_static, browser_page, start_worker):
    """docs/tutorial.md step 6, as it says: a schedule added in the admin whose callback
    always raises, at most 3 attempts, run by a real worker: the same occurrence retried
    after 5 s and 10 s, then given up to the next hourly slot; its receipts on the change
    page, one failed receipt's page, and the health page's failing row."""
    from django_durable_schedules.models import RunReceipt, Schedule

    page = browser_page
    base = served_static.url
    _login(page, base, "/admin/durable_schedules/schedule/add/")
    if page.locator("#nav-sidebar").is_visible():
        page.click("#toggle-nav-sidebar")
    page.fill("#id_name", "partner.import")
    page.select_option("#id_callback", "tests.partner_import")
    page.select_option("#id_kind", "interval")
    page.fill("#id_interval_seconds", "3600")
    page.locator("summary", has_text="Policies").click()
    page.fill("#id_max_attempts", "3")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r"/change/$"))
    flaky = Schedule.objects.get(name="partner.import")
    assert flaky.max_attempts == 3

    worker = start_worker()
    wait_until(
        lambda: RunReceipt.objects.filter(schedule_id=flaky.pk).count() == 3,
        timeout=60,
        message="three failed attempts",
    )
    worker.stop()
    receipts = list(RunReceipt.objects.filter(schedule_id=flaky.pk).order_by("finished_at"))
    assert [(r.occurrence, r.status, r.failure_count_after) for r in receipts] == [
        (1, "failed", 1),
        (1, "failed", 2),
        (1, "failed", 3),
    ]
    assert receipts[-1].error_message == "partner API answered 503 (attempt 3)"
    # Retried after 5 s and 10 s (BACKOFF_BASE_SECONDS x 2^(attempt-1)), then the next slot.
    waits = [(r.next_run_at - r.finished_at).total_seconds() for r in receipts]
    assert 5 <= waits[0] < 10 <= waits[1] < 30 and waits[2] > 3000, waits

    page.goto(f"{base}/admin/durable_schedules/schedule/{flaky.pk}/change/")
    inline = page.locator("#receipts-group")
    assert "partner API answered 503 (attempt 3)" in inline.inner_text()
    _shot_element(inline, "tutorial-change-receipts.png")
    page.goto(f"{base}/admin/durable_schedules/runreceipt/{receipts[-1].pk}/change/")
    assert "partner API answered 503 (attempt 3)" in page.locator("#content").inner_text()
    _shot(page, "tutorial-receipt.png", full_page=False)

    page.goto(f"{base}/admin/durable_schedules/schedule/health/")
    text = page.locator("#content-main").inner_text()
    assert "Failing schedules (1)" in text, text
    assert "RuntimeError: partner API answered 503 (attempt 3)" in text, text


def _tutorial_add_form(page, base: str) -> None:
    """docs/tutorial.md step 4, as it says: the add form filled in (its cron said in words),
    saved, the change page's *Now*, and *Trigger now* pressed twice, with the messages the
    tutorial quotes. The navigation sidebar is folded away (it lists the test project's
    other apps)."""
    from django_durable_schedules import register
    from django_durable_schedules.registry import registry

    register("reminders.send", lambda ctx: {"sent_to": ctx.payload.get("to")})
    try:
        page.goto(f"{base}/admin/durable_schedules/schedule/add/")
        if page.locator("#nav-sidebar").is_visible():
            page.click("#toggle-nav-sidebar")
        page.fill("#id_name", "reminders.ops")
        page.select_option("#id_callback", "reminders.send")
        page.select_option("#id_kind", "cron")
        page.fill("#id_timezone", "europe/paris")
        page.fill("#id_cron", "*/2 * * * *")
        page.fill("#id_payload", '{"to": "ops@example.com"}')
        sync_api.expect(page.locator("#id_cron_words")).to_have_text("Every 2 minutes")
        page.evaluate("window.scrollTo(0, 0)")  # the form's top, where the cron is
        _shot(page, "tutorial-add-form.png", full_page=False)
        page.click("input[name=_continue]")
        page.wait_for_url(re.compile(r"/change/$"))
        messages = page.locator("ul.messagelist")
        assert "The schedule “reminders.ops” was added successfully." in messages.inner_text()
        assert page.input_value("#id_timezone") == "Europe/Paris"
        now = page.locator("fieldset", has=page.locator("h2", has_text="Now"))
        text = now.inner_text()
        assert "active" in text and re.search(r"\d\d:\d[02468]:00 CES?T", text), text
        _shot_element(now, "tutorial-now.png")
        page.click("button.dds-tool:has-text('Trigger now')")
        page.wait_for_load_state()
        assert (
            "Triggered 1 schedule: reminders.ops (runs on the next worker pass, outside its grid)."
            in page.locator("ul.messagelist").inner_text()
        )
        page.click("button.dds-tool:has-text('Trigger now')")
        page.wait_for_load_state()
        assert (
            "Already triggered and not run yet, so one run happens at the next worker pass"
            in page.locator("ul.messagelist").inner_text()
        )
    finally:
        registry.remove("reminders.send")


def _login(page, base: str, next_url: str) -> None:
    page.goto(f"{base}/admin/login/?next={next_url}")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "password")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(re.escape(next_url) + "$"))


def test_operator_traps_in_a_real_browser(served_static, browser_page):
    """What a person clicks: Cancel asks on its own page (and a button never drops unsaved
    edits silently), each history row opens its own page, and a time entered for a Tokyo
    schedule is Tokyo time."""
    from django_durable_schedules.models import RunAttempt, Schedule

    _seed()
    page = browser_page
    base = served_static.url
    digest = Schedule.objects.get(name="digest.build")
    change = f"/admin/durable_schedules/schedule/{digest.pk}/change/"
    # The list fits at 1280 px with the navigation sidebar open: no column, the outcome
    # strip included, is cut off.
    page.set_viewport_size({"width": 1280, "height": 900})
    _login(page, base, "/admin/durable_schedules/schedule/")
    assert page.locator("#nav-sidebar").is_visible()
    fit = page.evaluate(
        """() => {
            const table = document.querySelector('#result_list');
            const box = table.parentElement;
            const strips = [...table.querySelectorAll('.dds-strip')];
            return {
                overflow: box.scrollWidth - box.clientWidth,
                stripRight: Math.max(...strips.map(s => s.getBoundingClientRect().right)),
                boxRight: box.getBoundingClientRect().right,
            };
        }"""
    )
    assert fit["overflow"] <= 0 and fit["stripRight"] <= fit["boxRight"], fit
    _shot(page, "admin-changelist-1280.png", full_page=False)
    # At 1920 px the list takes the extra width (its table as wide as its box, nothing to
    # scroll), light and dark.
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.reload()
    wide = page.evaluate(
        """() => {
            const table = document.querySelector('#result_list');
            const box = table.parentElement;
            return {
                overflow: box.scrollWidth - box.clientWidth,
                table: table.getBoundingClientRect().width,
                box: box.getBoundingClientRect().width,
                page: document.documentElement.scrollWidth,
            };
        }"""
    )
    assert wide["overflow"] <= 0 and wide["page"] <= 1920, wide
    # (The box: the window less the navigation sidebar and the filters, about 650 px.)
    assert wide["table"] >= wide["box"] - 2 and wide["box"] >= 0.6 * 1920, wide
    _shot(page, "admin-changelist-1920.png", full_page=False)
    page.emulate_media(color_scheme="dark")
    page.reload()
    _shot(page, "admin-changelist-1920-dark.png", full_page=False)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base}{change}")

    # An unsaved edit, then Disable: the browser asks; dismissing keeps the page and the edit.
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.fill("#id_interval_seconds", "1200")
    page.click("button.dds-tool:has-text('Disable')")
    assert len(dialogs) == 1 and "not saved" in dialogs[0]
    assert page.input_value("#id_interval_seconds") == "1200"
    assert page.url.endswith(change)
    digest.refresh_from_db()
    assert digest.status == "active" and digest.interval_seconds == 900

    # Without edits, Cancel… opens a confirmation page; "No, take me back" changes nothing.
    page.reload()
    page.click("a.dds-tool:has-text('Cancel')")
    page.wait_for_url(re.compile(r"/transition/cancel/$"))
    assert "Cancelling is final" in page.locator("#content").inner_text()
    _shot(page, "admin-cancel-confirmation.png", full_page=False)
    page.get_by_role("link", name="No, take me back").click()
    page.wait_for_url(re.compile(re.escape(change) + "$"))
    digest.refresh_from_db()
    assert digest.status == "active"

    # Confirmed, it is cancelled, and the page says so.
    page.click("a.dds-tool:has-text('Cancel')")
    page.wait_for_url(re.compile(r"/transition/cancel/$"))
    page.click("input[type=submit][value^='Yes, cancel']")
    page.wait_for_url(re.compile(re.escape(change) + "$"))
    # The message docs/tutorial.md step 8 quotes (there for partner.import).
    assert (
        "Cancelled 1 schedule: digest.build (active → cancelled)."
        in page.locator("ul.messagelist").inner_text()
    )
    # The audit trail's newest row, as the tutorial quotes it: action, who, from where, what.
    newest = page.locator("#content-main tr.has_original", has_text="cancelled").first
    cells = [c.strip() for c in newest.locator("td").all_inner_texts()]
    assert cells[2:6] == ["cancelled", "admin", "admin", "status: active → cancelled"], cells
    digest.refresh_from_db()
    assert digest.status == "cancelled"

    # The bulk action asks too, listing what it would cancel.
    page.goto(f"{base}/admin/durable_schedules/schedule/")
    for name in ("partner.import", "sessions.clear_expired"):
        row = page.locator("#result_list tbody tr", has=page.get_by_role("link", name=name))
        row.locator("input.action-select").check()
    page.select_option("select[name=action]", "cancel")
    page.click("button[name=index]")
    page.wait_for_load_state()
    text = page.locator("#content").inner_text()
    assert "These 2 schedules will be cancelled" in text and "partner.import" in text
    page.get_by_role("link", name="No, take me back").click()
    page.wait_for_load_state()
    assert Schedule.objects.filter(status="cancelled").count() == 1

    # Each attempt row opens its own page; the schedule column opens the schedule.
    page.goto(f"{base}/admin/durable_schedules/runattempt/")
    first = page.locator("#result_list tbody tr").first
    run_label = first.locator("th.field-run a").inner_text()
    first.locator("th.field-run a").click()
    page.wait_for_url(re.compile(r"/runattempt/[0-9a-f-]+/change/$"))
    attempt_id = page.url.rstrip("/").split("/")[-2]
    attempt = RunAttempt.objects.get(pk=attempt_id)
    assert run_label == f"#{attempt.occurrence}.{attempt.attempt}"
    page.go_back()
    first = page.locator("#result_list tbody tr").first
    name = first.locator("td.field-schedule_link a").inner_text()
    first.locator("td.field-schedule_link a").click()
    page.wait_for_url(re.compile(r"/schedule/[0-9a-f-]+/change/$"))
    assert page.locator("#id_name").input_value() == name

    # The cron field says its expression in words as you type, and what is wrong with it.
    page.goto(f"{base}/admin/durable_schedules/schedule/add/")
    page.select_option("#id_kind", "cron")  # the form shows the cron field for a cron
    page.fill("#id_cron", "0 9 * * 1-5")
    words = page.locator("#id_cron_words")
    sync_api.expect(words).to_have_text("At 09:00, Monday through Friday")
    page.fill("#id_cron", "61 * * * *")
    sync_api.expect(words).to_contain_text("minute")
    sync_api.expect(words).to_have_class(re.compile("dds-cron-error"))
    _tutorial_add_form(page, base)

    # A one-shot in Asia/Tokyo entered as 09:00 is 09:00 in Tokyo (00:00 UTC).
    page.goto(f"{base}/admin/durable_schedules/schedule/add/")
    page.fill("#id_name", "tokyo.once")
    page.select_option("#id_callback", "tests.noop")
    page.select_option("#id_kind", "once")  # hides the interval (emptied when saved)
    page.fill("#id_timezone", "Asia/Tokyo")
    page.fill("#id_run_at", "2027-06-01T09:00:00")
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r"/change/$"))
    tokyo = Schedule.objects.get(name="tokyo.once")
    assert tokyo.run_at.isoformat() == "2027-06-01T00:00:00+00:00"
    assert page.input_value("#id_run_at") in ("2027-06-01T09:00", "2027-06-01T09:00:00")
    help_text = page.locator(".field-run_at .help").inner_text()
    assert "2027-06-01 09:00:00 JST = 2027-06-01 00:00:00 UTC" in help_text


def test_a_backfill_from_the_list_action_in_a_real_browser(
    served_static, start_worker, browser_page
):
    """A person backfills three past hours: ticks the row, picks "Backfill…", enters the
    range, sees the three slots on the confirmation page, confirms, and after real worker
    passes sees the backfill done and three receipts, each its own occurrence."""
    from django_durable_schedules import state
    from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule

    now = state.db_now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    start, end = hour - timedelta(hours=3), hour
    s = Schedule.objects.create(
        name="reports.hourly",
        callback="tests.echo",
        kind="cron",
        cron="0 * * * *",
        timezone="UTC",
        created_at=now - timedelta(hours=6),
    )
    page = browser_page
    base = served_static.url
    _login(page, base, "/admin/durable_schedules/schedule/")

    row = page.locator("#result_list tbody tr", has=page.get_by_role("link", name="reports.hourly"))
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "backfill")
    page.click("button[name=index]")
    page.wait_for_load_state()
    assert "Backfill reports.hourly" in page.locator("#content").inner_text()
    assert "Start (in UTC)" in page.locator("#content").inner_text()

    # A range whose end is before its start is refused on the form, nothing stored.
    # A datetime-local input: a wall time in the schedule's zone (UTC here), to the second.
    wall = "%Y-%m-%dT%H:%M:%S"
    page.fill("#id_start", end.strftime(wall))
    page.fill("#id_end", start.strftime(wall))
    page.click("input[value='Show the slots']")
    page.wait_for_load_state()
    assert "Must be after start." in page.locator("#content").inner_text()

    page.fill("#id_start", start.strftime(wall))
    page.fill("#id_end", end.strftime(wall))
    page.click("input[value='Show the slots']")
    page.wait_for_load_state()
    slots = page.locator("ol.dds-confirm-list li").all_inner_texts()
    expected = [f"{(start + timedelta(hours=i)):%Y-%m-%d %H:%M:%S} UTC" for i in range(3)]
    assert slots == expected
    assert not s.backfills.exists()  # the confirmation page stores nothing
    page.click("input[value='Yes, backfill 3 slots']")
    page.wait_for_url(re.compile(r"/admin/durable_schedules/schedule/$"))
    message = page.locator("ul.messagelist li.success").inner_text()
    assert "Backfill of reports.hourly: 3 slots" in message

    # Real worker passes run the slots, one at a time, in order.
    for _ in range(6):
        if RunReceipt.objects.filter(schedule_id=s.pk, attempt__origin="backfill").count() == 3:
            break
        worker = start_worker("--once", "--worker-id", "browser-backfill")
        assert worker.wait(90) == 0, worker.output()
    backfilled = list(
        RunAttempt.objects.filter(schedule_id=s.pk, origin="backfill").order_by("occurrence")
    )
    assert [a.scheduled_for for a in backfilled] == [start + timedelta(hours=i) for i in range(3)]
    assert len({a.idempotency_key for a in backfilled}) == 3

    page.goto(f"{base}/admin/durable_schedules/backfill/")
    listed = page.locator("#result_list tbody tr", has_text="reports.hourly").inner_text()
    assert "3 of 3 slots" in listed and "completed" in listed, listed


def test_run_now_with_an_override_in_a_real_browser(served_static, start_worker, browser_page):
    """ "Run now…" on the change page: a form of the callback's payload schema, prefilled
    with the schedule's payload; one value changed and submitted, the usual message; a real
    worker pass runs it and the attempts list shows the payload it ran with."""
    from django_durable_schedules.models import RunAttempt, Schedule

    page = browser_page
    base = served_static.url
    report = Schedule.objects.create(
        name="reports.build",
        callback="tests.report",
        kind="interval",
        interval_seconds=86400,
        timezone="UTC",
        payload={"region": "eu", "limit": 500},
        status="paused",
    )
    change = f"/admin/durable_schedules/schedule/{report.pk}/change/"
    _login(page, base, change)
    page.click("a.dds-tool:has-text('Run now')")
    page.wait_for_url(re.compile(r"/run-now/$"))
    region = page.get_by_label("region")
    limit = page.get_by_label("limit")
    assert region.input_value() == "eu" and limit.input_value() == "500"
    limit.fill("1")
    page.fill("#id_note", "one account, to check the fix")
    _shot(page, "admin-run-now.png", full_page=False)
    page.click("input[type=submit][value='Run now']")
    page.wait_for_url(re.compile(re.escape(change) + "$"))
    message = page.locator("ul.messagelist li.success").inner_text()
    assert "Triggered 1 schedule: reports.build" in message
    report.refresh_from_db()
    assert report.trigger_payload == {"limit": 1}

    worker = start_worker("--once", "--worker-id", "browser-run-now")
    assert worker.wait(90) == 0, worker.output()
    assert RunAttempt.objects.get(schedule_id=report.pk).payload == {"region": "eu", "limit": 1}
    page.goto(f"{base}{change}")
    attempts = page.locator("#attempts-group").inner_text()
    assert '{"limit": 1, "region": "eu"}' in attempts


def test_a_rerun_from_a_failed_receipt_in_a_real_browser(served_static, browser_page):
    """A person opens a failed receipt, clicks "Re-run this occurrence", reads which
    occurrence, its last outcome and its key on the confirmation page, confirms, and lands
    on the schedule's page with the message."""
    from django_durable_schedules import state
    from django_durable_schedules.models import RunReceipt, Schedule
    from django_durable_schedules.worker.execution.runner import execute

    s = Schedule.objects.create(
        name="partner.sync",
        callback="tests.first_attempt_fails",
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
        max_attempts=1,
    )
    state.complete([execute(c) for c in state.claim_due(worker="browser")])
    receipt = RunReceipt.objects.get(schedule_id=s.pk)
    assert receipt.status == "failed"
    page, base = browser_page, served_static.url
    _login(page, base, f"/admin/durable_schedules/runreceipt/{receipt.pk}/change/")
    page.get_by_role("link", name="Re-run this occurrence").click()
    page.wait_for_url(re.compile(r"/rerun/$"))
    text = page.locator("#content").inner_text()
    assert "Occurrence 1 of partner.sync" in text and "Its last outcome: failed" in text
    assert f"{s.pk}:1" in text
    page.fill("#id_note", "the partner fixed their API")
    page.click("input[value='Yes, re-run occurrence 1']")
    page.wait_for_url(re.compile(rf"/schedule/{s.pk}/change/$"))
    message = page.locator("ul.messagelist li.success").inner_text()
    assert "Occurrence 1 of partner.sync will be re-run at the next worker pass" in message
    s.refresh_from_db()
    assert (s.rerun_occurrence, s.rerun_attempt) == (1, 2)


def test_a_manual_schedule_added_then_duplicated_in_a_real_browser(served_static, browser_page):
    """A person adds a manual schedule (choosing kind "manual" hides the timing fields),
    then duplicates it from its change page under a new name: the copy is listed paused."""
    from django_durable_schedules.models import Schedule

    page = browser_page
    base = served_static.url
    _login(page, base, "/admin/durable_schedules/schedule/")
    page.goto(f"{base}/admin/durable_schedules/schedule/add/")
    timing_fields = ("#id_interval_seconds", "#id_cron", "#id_rrule", "#id_run_at", "#id_max_runs")
    page.select_option("#id_kind", "interval")  # only its own timing fields are shown
    for field in ("#id_interval_seconds", "#id_max_runs", "#id_start_at"):
        sync_api.expect(page.locator(field)).to_be_visible()
    for field in ("#id_cron", "#id_rrule", "#id_run_at"):
        sync_api.expect(page.locator(field)).to_be_hidden()
    page.fill("#id_name", "ops.rebuild-index")
    page.select_option("#id_callback", "tests.noop")
    page.select_option("#id_kind", "manual")
    for field in (*timing_fields, "#id_start_at", "#id_end_at", "#id_timezone"):
        sync_api.expect(page.locator(field)).to_be_hidden()
    sync_api.expect(page.locator("#id_kind")).to_be_visible()
    page.click("input[name=_continue]")
    page.wait_for_url(re.compile(r"/change/$"))
    made = Schedule.objects.get(name="ops.rebuild-index")
    assert made.kind == "manual" and made.status == "active" and made.next_run_at is None
    sync_api.expect(page.locator("#id_cron")).to_be_hidden()  # the change page hides them too

    page.click("a.dds-duplicate-link")
    page.wait_for_url(re.compile(r"/duplicate/$"))
    assert page.input_value("#id_name") == "ops.rebuild-index-copy"
    page.fill("#id_name", "ops.rebuild-index")  # taken: a form error
    page.click("input[name=_duplicate]")
    sync_api.expect(page.locator(".errorlist")).to_contain_text("already exists")
    page.fill("#id_name", "ops.rebuild-index-eu")
    page.click("input[name=_duplicate]")
    page.wait_for_url(re.compile(r"/admin/durable_schedules/schedule/$"))
    assert (
        "Duplicated ops.rebuild-index as ops.rebuild-index-eu"
        in page.locator("ul.messagelist").inner_text()
    )
    row = page.locator(
        "#result_list tbody tr", has=page.get_by_role("link", name="ops.rebuild-index-eu")
    )
    assert "paused" in row.inner_text()
    assert "manual: runs only when triggered" in row.inner_text()
    copy = Schedule.objects.get(name="ops.rebuild-index-eu")
    assert copy.kind == "manual" and copy.status == "paused" and copy.next_run_at is None


def test_a_pause_with_a_note_and_an_end_from_the_change_page_in_a_real_browser(
    served_static, browser_page
):
    """A person clicks "Pause…" on a schedule's page, writes why and until when, submits,
    and is back on the page, which shows it paused with the note and the end."""
    from django.utils import timezone as dj_timezone

    from django_durable_schedules import state
    from django_durable_schedules.models import Schedule

    s = Schedule.objects.create(
        name="exports.nightly", callback="tests.noop", kind="cron", cron="0 2 * * *"
    )
    change = f"/admin/durable_schedules/schedule/{s.pk}/change/"
    page = browser_page
    base = served_static.url
    _login(page, base, change)
    page.click("a.dds-tool:has-text('Pause…')")
    page.wait_for_url(re.compile(r"/pause/$"))
    zone = dj_timezone.get_current_timezone_name()
    assert f"Until (in {zone})" in page.locator("#content").inner_text()
    # A datetime-local input: a wall time in the admin's zone, to the minute.
    until = (state.db_now() + timedelta(hours=3)).replace(second=0, microsecond=0)
    page.fill("#id_note", "INC-42: partner API down")
    page.fill("#id_until", dj_timezone.localtime(until).strftime("%Y-%m-%dT%H:%M"))
    page.click("input[name=pause]")
    page.wait_for_url(re.compile(re.escape(change) + "$"))
    assert "Paused 1 schedule" in page.locator("ul.messagelist li.success").inner_text()
    status = page.locator(".dds-badge.dds-s-paused").first
    assert status.is_visible()
    note = page.locator(".dds-pause-note").first.inner_text()
    assert "INC-42: partner API down" in note and f"until {until:%Y-%m-%d %H:%M:%S} UTC" in note
    s.refresh_from_db()
    assert (s.status, s.pause_reason, s.paused_until) == (
        "paused",
        "INC-42: partner API down",
        until,
    )
    # The list shows the note too.
    page.goto(f"{base}/admin/durable_schedules/schedule/")
    row = page.locator("#result_list tbody tr", has_text="exports.nightly").inner_text()
    assert "INC-42: partner API down" in row
