"""Registration, code-declared schedules and their sync."""

from datetime import UTC, datetime

import pytest

from django_durable_schedules import register, state
from django_durable_schedules.models import Schedule
from django_durable_schedules.registry import registry

from .factories import T0


@pytest.fixture
def cleanup_registry():
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.remove(name)


def test_decorator_and_call_forms(cleanup_registry):
    @register("t.deco")
    def deco(ctx):
        return 1

    assert deco(None) == 1
    register("t.call", lambda ctx: 2)
    assert {"t.deco", "t.call"} <= set(registry.names())


@pytest.mark.parametrize("name", ["", "-x", "a b", "x" * 129, "a/b"])
def test_bad_names_are_refused(name):
    with pytest.raises(ValueError):
        register(name, lambda ctx: None)


def test_only_one_kind_of_declaration():
    with pytest.raises(ValueError):
        register("t.two", lambda ctx: None, every=5, cron="* * * * *")


def test_async_callbacks_are_detected(cleanup_registry):
    async def a(ctx):
        return 1

    register("t.async", a)
    assert registry.get("t.async").is_async


@pytest.mark.django_db(transaction=True)
def test_sync_creates_and_updates_without_losing_run_state(cleanup_registry):
    register("t.declared", lambda ctx: None, every=3600)
    state.sync_declared()
    s = Schedule.objects.get(name="t.declared")
    assert (s.kind, s.interval_seconds, s.callback) == ("interval", 3600, "t.declared")
    Schedule.objects.filter(pk=s.pk).update(occurrence=7, failure_count=2)
    state.sync_declared()  # unchanged: nothing written
    s.refresh_from_db()
    assert s.occurrence == 7
    register("t.declared", lambda ctx: None, cron="0 3 * * *", timezone="Europe/Paris")
    state.sync_declared()
    s.refresh_from_db()
    assert (s.kind, s.cron, s.timezone, s.occurrence, s.failure_count) == (
        "cron",
        "0 3 * * *",
        "Europe/Paris",
        7,
        2,
    )
    assert s.next_run_at.astimezone(UTC).hour in (1, 2)  # 03:00 Paris


@pytest.mark.django_db(transaction=True)
def test_declared_once(cleanup_registry):
    at = datetime(2099, 12, 31, 23, 59, 59, tzinfo=UTC)
    register("t.once", lambda ctx: None, at=at)
    state.sync_declared()
    s = Schedule.objects.get(name="t.once")
    assert s.kind == "once" and s.next_run_at == at
    assert T0 < at
