"""Django's non-public ORM API is used in named places only (issue #25, item 7), and each
internal the hot path reads is pinned here, so a Django release that changes one fails a
named test on that release's tox cell (tox.ini: Django 5.2, 6.0, 6.1), not a worker.

The equivalence of the shortcuts with the ORM itself is tested in ``tests/test_hot_path.py``
(compiled reads return what the queryset returns) and ``tests/test_loading.py`` (rows
loaded without ``Model.__init__`` equal Django's own instances)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from django.db import connection
from django.db.models import Model, Value
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute

from django_durable_schedules.models import RunAttempt, Schedule

PACKAGE = Path(__file__).resolve().parent.parent / "django_durable_schedules"

#: Where each non-public ORM name may appear, and why.
ALLOWED = {
    "db/fast_orm.py": "the hot path's compiled reads and row loading",
    "models/queries.py": "the row-by-row reader of a batch with an unreadable row "
    "(_fetch_all, _chain, query.clear_limits): totality, not speed",
    "db/counts.py": "planner_estimate: EXPLAIN of a queryset's SQL (query.sql_with_params)",
}
INTERNAL = re.compile(
    r"django\.db\.models\.(sql|base|query_utils|fields\.related_descriptors)\b"
    r"|\bget_compiler\(|\bget_converters\(|\bklass_info\b|\bannotation_col_map\b"
    r"|\.query\.(clear_limits|sql_with_params)\(|\b_fetch_all\b|\b_iterable_class\b"
    r"|\b_chain\(\)|\bModelState\b"
)


def test_djangos_internals_are_used_only_where_named():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        hits = sorted({m.group(0) for m in INTERNAL.finditer(path.read_text())})
        if hits:
            found[rel] = hits
    assert set(found) <= set(ALLOWED), {k: v for k, v in found.items() if k not in ALLOWED}
    assert "db/fast_orm.py" in found


@pytest.mark.django_db
def test_the_compiler_gives_what_compiled_statements_read():
    qs = Schedule.objects.filter(name="x").annotate(flag=Value(True))
    compiler = qs.query.get_compiler(using=connection.alias)
    sql, params = compiler.as_sql()
    assert isinstance(sql, str) and isinstance(params, tuple | list)
    width = len(Schedule._meta.concrete_fields)
    assert compiler.col_count == width + 1  # the fields, then the annotation
    assert compiler.klass_info["model"] is Schedule
    assert list(compiler.klass_info["select_fields"]) == list(range(width))
    first = compiler.select[0][0]
    assert first.target.attname == Schedule._meta.concrete_fields[0].attname
    converters = compiler.get_converters([column[0] for column in compiler.select])
    for position, (functions, expression) in converters.items():
        assert 0 <= position < compiler.col_count
        assert all(callable(f) for f in functions) and expression is not None
    assert compiler.annotation_col_map == {"flag": width}


def test_model_state_and_descriptors_are_what_row_loading_fills():
    state = ModelState()
    assert state.adding is True and state.db is None
    for model in (Schedule, RunAttempt):
        for field in model._meta.concrete_fields:
            assert type(getattr(model, field.attname)) in (
                DeferredAttribute,
                ForeignKeyDeferredAttribute,
            ), (model, field.attname)


def test_from_db_takes_what_fast_loading_passes_on():
    parameters = inspect.signature(Model.from_db).parameters
    assert list(parameters)[:3] == ["db", "field_names", "values"]


def test_the_row_by_row_reader_leans_on_what_it_names():
    qs = Schedule.objects.all()
    assert callable(qs._fetch_all) and callable(qs._chain)
    assert callable(qs.query.clear_limits) and callable(qs.query.sql_with_params)
    assert qs._iterable_class.__name__ == "ModelIterable"
