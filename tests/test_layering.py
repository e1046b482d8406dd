"""The architecture (docs/architecture.md) held against the code, by reading its source.

* Only the state package, and the db/ helpers that it or the one retention path call inside
  their transactions, open transactions or take row locks.
* The pure modules (``state/values.py``, ``state/bounds.py``, ``state/rules.py``,
  ``state/outcomes.py``, ``state/backfill_rules.py``, the ``timing/`` package) import nothing from ``django.db``.
* The thin layers (admin, API, management commands) never write a schedule's run state:
  they call ``state.*``.

Module length (400-500 lines) is a guideline, reported by tests/test_seams.py, which also
holds that no private name crosses a module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "django_durable_schedules"

#: Modules that may call ``transaction.atomic`` / ``select_for_update``.
TRANSACTION_OWNERS = ("state/", "db/retention.py", "db/locks.py")
#: Known exceptions, each one (module, function) with why.
TRANSACTION_EXCEPTIONS = {
    # The admin's bulk delete wraps its LogEntry and state.delete_schedule in one
    # transaction, so the log entry commits only with the deletion it records.
    ("admin/actions.py", "delete_selected"),
}

#: Pure modules; an entry ending in ``/`` is a whole package (see ``_under``).
PURE = (
    "state/values.py",
    "state/bounds.py",
    "state/rules.py",
    "state/slot_rules.py",
    "state/attempt_rules.py",
    "state/outcomes.py",
    "state/backfill_rules.py",
    "state/exclusion_rules.py",
    "state/records.py",
    "state/machine.py",
    "state/alert_rules.py",
    "state/pause_rules.py",
    "state/columns.py",
    "state/overrides.py",
    "timing/",
    "limits.py",
    "payloads.py",
    "declarations.py",
    "stats_math.py",
)

THIN = ("admin/", "api/", "management/commands/")
RUN_STATE = frozenset(
    {
        "status",
        "next_run_at",
        "lease_token",
        "lease_expires_at",
        "occurrence",
        "attempt",
        "failure_count",
        "retry_scheduled_for",
        "triggered_at",
        "missed_count",
        "degraded_reason",
    }
)
#: Calls whose keywords would write (or build a row to write) schedule columns.
WRITING_CALLS = frozenset(
    {"update", "create", "get_or_create", "update_or_create", "bulk_create", "Schedule"}
)


def modules() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith("migrations/"):
            found.append((rel, ast.parse(path.read_text(), rel)))
    return found


def _under(rel: str, prefixes: tuple[str, ...]) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in prefixes)


def _functions(tree: ast.Module) -> dict[ast.AST, str]:
    """Each node of ``tree`` mapped to the name of the outermost function it is in."""
    owner: dict[ast.AST, str] = {}
    for top in ast.walk(tree):
        if isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef) and top not in owner:
            for node in ast.walk(top):
                owner.setdefault(node, top.name)
    return owner


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def test_only_the_state_package_opens_transactions_and_takes_row_locks():
    offenders = []
    for rel, tree in modules():
        if _under(rel, TRANSACTION_OWNERS):
            continue
        owner = _functions(tree)
        for node in ast.walk(tree):
            name = ""
            if isinstance(node, ast.Attribute) and node.attr in ("atomic", "select_for_update"):
                name = node.attr
            elif isinstance(node, ast.ImportFrom) and node.module == "django.db.transaction":
                name = "import from django.db.transaction"
            if name and (rel, owner.get(node, "")) not in TRANSACTION_EXCEPTIONS:
                offenders.append(f"{rel}:{node.lineno} {name}")
    assert offenders == []


def pure_modules() -> list[str]:
    """The modules PURE names, its packages expanded to their modules."""
    rels = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py"))
    return [rel for rel in rels if _under(rel, PURE)]


def test_every_pure_entry_names_modules():
    found = pure_modules()
    assert [p for p in PURE if not any(_under(rel, (p,)) for rel in found)] == []


@pytest.mark.parametrize("rel", pure_modules())
def test_pure_modules_import_nothing_from_django_db(rel):
    tree = ast.parse((PACKAGE / rel).read_text(), rel)
    imported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.append(node.module)
            imported += [f"{node.module}.{a.name}" for a in node.names]
    assert [m for m in imported if m == "django.db" or m.startswith("django.db.")] == []


def test_thin_layers_never_write_run_state():
    offenders = []
    for rel, tree in modules():
        if not _under(rel, THIN):
            continue
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if isinstance(t, ast.Attribute) and t.attr in RUN_STATE:
                        offenders.append(f"{rel}:{node.lineno} assigns .{t.attr}")
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            if name in WRITING_CALLS:
                offenders += [
                    f"{rel}:{node.lineno} {name}({k.arg}=...)"
                    for k in node.keywords
                    if k.arg in RUN_STATE
                ]
            if name == "setattr" and len(node.args) > 1:
                key = node.args[1]
                if isinstance(key, ast.Constant) and key.value in RUN_STATE:
                    offenders.append(f"{rel}:{node.lineno} setattr(..., {key.value!r})")
            for k in node.keywords:  # save(update_fields=[...]) / bulk_update(rows, [...])
                if k.arg == "update_fields":
                    offenders += _literal_names(rel, node, k.value)
            if name == "bulk_update" and len(node.args) > 1:
                offenders += _literal_names(rel, node, node.args[1])
    assert offenders == []


def _literal_names(rel: str, node: ast.Call, value: ast.expr) -> list[str]:
    return [
        f"{rel}:{node.lineno} writes {c.value!r}"
        for c in ast.walk(value)
        if isinstance(c, ast.Constant) and c.value in RUN_STATE
    ]
