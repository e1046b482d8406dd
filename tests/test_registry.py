"""Registration, code-declared schedules and their sync."""

from datetime import UTC, datetime

import pytest

from django_durable_schedules import register, state
from django_durable_schedules.declarations import Flow
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


@pytest.mark.parametrize(
    "kwargs",
    [
        {"manual": True, "every": 60},  # was a TypeError while after= said ValueError
        {"manual": True, "max_runs": 2},
        {"after": ["t.up"], "every": 60},
        {"after": ["t.up"], "manual": True},
        {"every": 60, "cron": "0 3 * * *"},
        {"every": 60, "extra_specs": ["0 4 * * *"]},
        {"every": 60, "wait_seconds": 600},
        {"payload": {"a": 1}},  # a schedule's argument without a schedule
    ],
)
def test_arguments_that_cannot_go_together_are_a_value_error(cleanup_registry, kwargs):
    """One rule for every clash of register()'s arguments: ValueError, as the standard
    library raises for keyword arguments that exclude each other (``open(..., "rb",
    encoding=...)``, ``subprocess.run(input=..., stdin=...)``); TypeError is kept for a
    value of the wrong type."""
    with pytest.raises(ValueError, match="=") as caught:
        register("t.clash", lambda ctx: None, **kwargs)
    assert not isinstance(caught.value, TypeError)
    assert "t.clash" not in registry


@pytest.mark.parametrize(
    "kwargs", [{"manual": "yes"}, {"after": "t.up"}, {"every": 60, "priority": "1"}]
)
def test_a_value_of_the_wrong_type_is_a_type_error(cleanup_registry, kwargs):
    with pytest.raises(TypeError):
        register("t.clash", lambda ctx: None, **kwargs)
    assert "t.clash" not in registry


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


# -- pool= and priority= (issue #28) --------------------------------------------------------


def test_pool_and_priority_are_part_of_the_declaration(cleanup_registry):
    from django_durable_schedules import register_command

    register("t.flow", lambda ctx: None, every=60, pool="reports", priority=-5)
    d = registry.get("t.flow").declaration
    assert (d.flow.pool, d.flow.priority) == ("reports", -5)
    register("t.flow.manual", lambda ctx: None, manual=True, pool="p.1", priority=32767)
    assert registry.get("t.flow.manual").declaration.flow.pool == "p.1"
    register_command("t.flow.cmd", "check", cron="0 3 * * *", pool="ops", priority=3)
    d = registry.get("t.flow.cmd").declaration
    assert (d.flow.pool, d.flow.priority) == ("ops", 3)
    register("t.flow.plain", lambda ctx: None, every=60)  # not given: None, the defaults
    assert registry.get("t.flow.plain").declaration.flow == Flow()


def test_register_and_register_command_declare_flow_control_through_one_helper(
    cleanup_registry,
):
    """The flow-control arguments (pool, priority, concurrency group) are one value,
    :class:`Flow`, checked and carried alike for a callback and a command."""
    from django_durable_schedules import register_command

    given = {"pool": "ops", "priority": 3, "concurrency_group": "partner-api"}
    register("t.flow.f", lambda ctx: None, every=60, **given)
    register_command("t.flow.c", "check", every=60, **given)
    for name in ("t.flow.f", "t.flow.c"):
        assert registry.get(name).declaration.flow == Flow(**given)
    for register_one in (
        lambda **kw: register("t.flow.none", lambda ctx: None, **kw),
        lambda **kw: register_command("t.flow.none", "check", **kw),
    ):
        with pytest.raises(ValueError, match="pool/concurrency_group need one of every="):
            register_one(pool="ops", concurrency_group="g")
        with pytest.raises(ValueError, match="invalid concurrency_group"):
            register_one(every=60, concurrency_group="Not A Slug")
    assert "t.flow.none" not in registry


@pytest.mark.parametrize("pool", ["", "-x", "a b", "x" * 65, "a/b", "ok\n", 7])
def test_a_malformed_pool_is_refused_at_register(pool):
    with pytest.raises(ValueError, match="invalid pool") as exc:
        register("t.badpool", lambda ctx: None, every=60, pool=pool)
    assert "1-64 of letters" in str(exc.value)
    assert "t.badpool" not in registry


@pytest.mark.parametrize(
    ("priority", "error"),
    [
        (32768, ValueError),
        (-32769, ValueError),
        (10**9, ValueError),
        (True, TypeError),
        (1.5, TypeError),
        ("3", TypeError),
    ],
)
def test_a_bad_priority_is_refused_at_register(priority, error):
    with pytest.raises(error, match="priority"):
        register("t.badprio", lambda ctx: None, every=60, priority=priority)
    assert "t.badprio" not in registry


def test_a_bad_pool_or_priority_is_refused_by_register_command():
    from django_durable_schedules import register_command

    with pytest.raises(ValueError, match="invalid pool"):
        register_command("t.cmd.bad", "check", every=60, pool="no spaces")
    with pytest.raises(ValueError, match="priority"):
        register_command("t.cmd.bad", "check", every=60, priority=40000)


@pytest.mark.parametrize("kwargs", [{"pool": "reports"}, {"priority": 1}])
def test_pool_and_priority_need_a_declared_schedule(kwargs):
    with pytest.raises(ValueError, match=f"^{next(iter(kwargs))} needs one of every="):
        register("t.nodecl", lambda ctx: None, **kwargs)


@pytest.mark.django_db(transaction=True)
def test_sync_carries_pool_and_priority_and_a_change_is_an_edit(cleanup_registry):
    from django_durable_schedules.models import ScheduleEvent

    register("t.flowsync", lambda ctx: None, every=3600, pool="reports", priority=7)
    state.sync_declared()
    s = Schedule.objects.get(name="t.flowsync")
    assert (s.pool, s.priority) == ("reports", 7)
    created = ScheduleEvent.objects.get(schedule_name="t.flowsync", action="created")
    assert (created.changes["pool"], created.changes["priority"]) == ([None, "reports"], [None, 7])

    register("t.flowsync", lambda ctx: None, every=3600, pool="reports", priority=-2)
    state.sync_declared()
    s.refresh_from_db()
    assert (s.pool, s.priority) == ("reports", -2)
    edited = ScheduleEvent.objects.get(schedule_name="t.flowsync", action="edited")
    assert edited.source == "code"
    assert edited.changes == {"priority": [7, -2]}

    state.sync_declared()  # unchanged: no other event
    assert ScheduleEvent.objects.filter(schedule_name="t.flowsync", action="edited").count() == 1


@pytest.mark.django_db(transaction=True)
def test_sync_leaves_pool_and_priority_alone_when_the_code_names_none(cleanup_registry):
    register("t.flowkeep", lambda ctx: None, every=3600)
    state.sync_declared()
    s = Schedule.objects.get(name="t.flowkeep")
    assert (s.pool, s.priority) == ("default", 0)
    Schedule.objects.filter(pk=s.pk).update(pool="ops", priority=4)  # set by an operator
    state.sync_declared()
    s.refresh_from_db()
    assert (s.pool, s.priority) == ("ops", 4)


@pytest.mark.django_db(transaction=True)
def test_sync_resolves_a_declared_concurrency_group_by_name(cleanup_registry):
    from django_durable_schedules import register_command
    from django_durable_schedules.models import ScheduleEvent

    group = state.save_group("partner-api", max_running=2)
    register("t.grouped", lambda ctx: None, every=3600, concurrency_group="partner-api")
    register_command("t.cmd.grouped", "check", every=3600, concurrency_group="partner-api")
    state.sync_declared()
    for name in ("t.grouped", "t.cmd.grouped"):
        assert Schedule.objects.get(name=name).concurrency_group_id == group.pk
    created = ScheduleEvent.objects.get(schedule_name="t.grouped", action="created")
    assert created.changes["concurrency_group"] == [None, group.pk]
    other = state.save_group("reports", rate="10/m")
    register("t.grouped", lambda ctx: None, every=3600, concurrency_group="reports")
    state.sync_declared()
    assert Schedule.objects.get(name="t.grouped").concurrency_group_id == other.pk
    register("t.grouped", lambda ctx: None, every=3600)  # names none: the row's is kept
    state.sync_declared()
    assert Schedule.objects.get(name="t.grouped").concurrency_group_id == other.pk


@pytest.mark.django_db(transaction=True)
def test_a_declared_group_that_does_not_exist_is_logged_and_skipped_by_sync(
    cleanup_registry, caplog
):
    """A group is a row: a declaration naming one that does not exist is an error of that
    declaration (logged, its schedule neither created nor changed) and not of the sync,
    which syncs the others (a worker starting, or ``migrate``, goes on); once the group
    exists the next sync creates the schedule in it."""
    register("t.nogroup", lambda ctx: None, every=3600, concurrency_group="missing")
    register("t.fine", lambda ctx: None, every=3600)
    with caplog.at_level("ERROR", logger="django_durable_schedules"):
        changed = state.sync_declared()
    assert [s.name for s in changed] == ["t.fine"]
    assert not Schedule.objects.filter(name="t.nogroup").exists()
    [record] = [r for r in caplog.records if "t.nogroup" in r.getMessage()]
    assert record.levelname == "ERROR"
    assert "concurrency group 'missing', which does not exist" in record.getMessage()
    group = state.save_group("missing", max_running=1)
    assert [s.name for s in state.sync_declared()] == ["t.nogroup"]
    assert Schedule.objects.get(name="t.nogroup").concurrency_group_id == group.pk


@pytest.mark.parametrize("group", ["No Spaces", 3, ""])
def test_a_malformed_group_name_is_refused_at_register(group):
    with pytest.raises(ValueError, match="invalid concurrency_group"):
        register("t.badgroup", lambda ctx: None, every=60, concurrency_group=group)
    assert "t.badgroup" not in registry


def test_a_group_needs_a_declared_schedule():
    with pytest.raises(ValueError, match="concurrency_group needs one of every="):
        register("t.nodeclgroup", lambda ctx: None, concurrency_group="g")


@pytest.mark.django_db
def test_declared_fields_without_a_database_name_the_group_field_only(
    cleanup_registry, django_assert_num_queries
):
    register("t.groupkeys", lambda ctx: None, every=60, concurrency_group="not-yet")
    with django_assert_num_queries(0):  # the admin's read-only fields, check E008
        fields = state.declared_fields(registry.get("t.groupkeys"))
    assert fields["concurrency_group"] is None
