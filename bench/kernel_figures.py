"""The figures of issue #25 ("the state kernel"), measured on this checkout, each with its goal.

    scripts/kernel-figures [--strict] [--skip-sql] [--failure-function NAME ...]

Prints one row per figure of the issue's table: the measure, its value now, its goal and
PASS or FAIL, then the sites behind the source counts. Exit status 0, or with ``--strict``
1 when any figure misses its goal. Every figure but (g) reads the source with :mod:`ast`
(nothing is imported); (g) runs one request against a throwaway SQLite database.

How each figure is counted (heuristics: they read code, they do not run it):

(a) files that write ``Schedule.status``: a module counts if it assigns ``<x>.status = ...``
    (plain, tuple or augmented assignment, ``setattr(x, "status", ...)``) where ``<x>`` is not
    named like another record (``NOT_SCHEDULE_NAMES``: backfill, receipt, outcome...), or passes a
    ``status=`` keyword to a ``create``/``update``/``replace``/``update_or_create``/
    ``get_or_create``/``bulk_create``/``Schedule`` call whose value is not a
    ``BackfillStatus``/``ReceiptStatus`` member and whose receiver (``replace``: whose first
    argument) is not named like another record.
(b) sites that write "no slot left -> completed": each ``Status.COMPLETED`` (not
    ``BackfillStatus.COMPLETED``) that is the value written by such an assignment or keyword
    (a comparison or a membership test is a read, not a write).
(c) relative imports of a sibling's private name: each name imported by ``from .x import
    _name`` (one leading underscore; dunders and underscore *modules* are not private names)
    anywhere in the package but its migrations. The same count is held as a ratchet by
    tests/test_seams.py.
(d) ``Worker.run``: the class ``Worker`` wherever it lives in the package. Lines from ``def``
    to the last line; nesting depth counts compound statements (``if``, ``for``, ``while``,
    ``try``, ``with``, ``match``) inside one another; branch points count ``if``/``elif``,
    loops, ``except`` clauses, ``case`` clauses, conditional expressions, each extra operand
    of ``and``/``or`` and each comprehension ``if``.
(e) the longest function (or method) under ``state/``: lines from ``def`` to its last line,
    and whether it has a docstring. ``_plan_claim``'s own length is shown beside it.
(f) the parameter count of the failure path's function (``_fail_attempt`` today; pass
    ``--failure-function`` for whatever replaces it), ``self``/``cls`` not counted.
(g) SQL statements for one ``POST api/schedules/`` of an interval schedule on SQLite: the
    test settings (tests/settings.py, tests/urls.py) against a fresh migrated database in a
    temporary directory, a staff user logged in through a session (Django's test
    ``Client.force_login``), counted by ``CaptureQueriesContext`` around the request: the
    session and user lookups are in the count.
(h) transition-table rows tied to code, from ``django_durable_schedules.state.transitions``
    (after importing the state package, whose rules fill the registry): when the module
    offers a registry of rule declarations (a mapping, sequence or function named in
    ``REGISTRY_NAMES``, e.g. ``RULES``: row id -> rules, plus ``ELSEWHERE`` for rules outside
    the package), the rows some declaration names, by identity or by ``id``; otherwise the
    rows that name code themselves (a truthy ``action``/``rule``/``implemented_by``...).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "django_durable_schedules"

#: Names the failure path's function had or may have (``--failure-function`` adds more).
FAILURE_FUNCTIONS = ("_fail_attempt", "fail_attempt")
#: Attributes of ``state.transitions`` that may hold the rules' declarations.
REGISTRY_NAMES = ("RULES", "DECLARATIONS", "REGISTRY", "declarations", "registry", "declared")
#: Attributes of a transition row that tie it to code.
ROW_CODE_FIELDS = ("action", "rule", "rules", "implemented_by", "code")

WRITING_CALLS = frozenset(
    {"create", "update", "replace", "update_or_create", "get_or_create", "bulk_create", "Schedule"}
)
NOT_SCHEDULE_ENUMS = frozenset(
    {"BackfillStatus", "ReceiptStatus", "RunStatus", "DeliveryStatus", "ChainSlotStatus"}
)
NOT_SCHEDULE_NAMES = (
    "backfill",
    "receipt",
    "attempt",
    "event",
    "outcome",
    "claim",
    "bf",
    "delivery",
    "deliveries",
)


@dataclass
class Figure:
    key: str
    measure: str
    value: str
    goal: str
    passed: bool
    sites: list[str] = field(default_factory=list)


def package_modules() -> list[tuple[str, ast.Module]]:
    """Every module of the package but its migrations, as (path under the package, tree)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not rel.startswith("migrations/"):
            found.append((rel, ast.parse(path.read_text(), rel)))
    return found


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _module_file(rel: str, node: ast.ImportFrom, name: str) -> bool:
    """Whether ``from <node.module> import name`` in ``rel`` imports a module of the package."""
    base = (PACKAGE / rel).parent
    for _ in range(node.level - 1):
        base = base.parent
    if node.module:
        base = base.joinpath(*node.module.split("."))
    return (base / f"{name}.py").exists() or (base / name / "__init__.py").exists()


def private_imports(modules: list[tuple[str, ast.Module]] | None = None) -> list[str]:
    """``rel:line .module._name`` for each private name a module imports from another one."""
    sites = []
    for rel, tree in modules if modules is not None else package_modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            for alias in node.names:
                if is_private(alias.name) and not (
                    node.level and _module_file(rel, node, alias.name)
                ):
                    dots = "." * node.level
                    sites.append(f"{rel}:{node.lineno} {dots}{node.module or ''}.{alias.name}")
    return sites


def _names_in(node: ast.AST) -> str:
    return " ".join(
        (n.id if isinstance(n, ast.Name) else n.attr).lower()
        for n in ast.walk(node)
        if isinstance(n, ast.Name | ast.Attribute)
    )


def _not_schedule(owner: ast.AST) -> bool:
    text = _names_in(owner)
    return any(word in text for word in NOT_SCHEDULE_NAMES)


def _status_value(value: ast.AST) -> str:
    """``"completed"`` if ``value`` writes ``Status.COMPLETED`` (also inside a conditional
    expression), ``"other-enum"`` for a member of a non-schedule status enum, else ``""``."""
    for n in ast.walk(value):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            if n.value.id in NOT_SCHEDULE_ENUMS:
                return "other-enum"
            if n.value.id == "Status" and n.attr == "COMPLETED":
                return "completed"
    return ""


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) pairs of an assignment, tuples unpacked position by position."""
    if isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            return [p for t, v in zip(target.elts, value.elts, strict=True) for p in _pairs(t, v)]
        return [(t, value) for t in target.elts]
    return [(target, value)]


def status_writes(
    modules: list[tuple[str, ast.Module]] | None = None,
) -> list[tuple[str, int, bool]]:
    """(module, line, writes ``Status.COMPLETED``) for each write of a schedule's status."""
    writes = []
    for rel, tree in modules if modules is not None else package_modules():
        for node in ast.walk(tree):
            pairs: list[tuple[ast.AST, ast.AST]] = []
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    pairs += _pairs(target, node.value)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign) and node.value is not None:
                pairs.append((node.target, node.value))
            for target, value in pairs:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "status"
                    and not _not_schedule(target.value)
                ):
                    kind = _status_value(value)
                    if kind != "other-enum":
                        writes.append((rel, node.lineno, kind == "completed"))
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "setattr" and len(node.args) == 3:
                key = node.args[1]
                if isinstance(key, ast.Constant) and key.value == "status":
                    if not _not_schedule(node.args[0]):
                        kind = _status_value(node.args[2])
                        if kind != "other-enum":
                            writes.append((rel, node.lineno, kind == "completed"))
            if name not in WRITING_CALLS:
                continue
            if isinstance(func, ast.Attribute) and _not_schedule(func.value):
                continue
            if name == "replace" and node.args and _not_schedule(node.args[0]):
                continue  # dataclasses.replace on a value that is not a row
            for kw in node.keywords:
                if kw.arg == "status":
                    kind = _status_value(kw.value)
                    if kind != "other-enum":
                        writes.append((rel, node.lineno, kind == "completed"))
    return writes


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1  # type: ignore[attr-defined, operator]


COMPOUND = (
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.Try,
    ast.With,
    ast.AsyncWith,
    ast.Match,
    ast.TryStar,
)


def nesting_depth(node: ast.AST, depth: int = 0) -> int:
    """The deepest chain of compound statements inside one another below ``node``
    (an ``elif`` is not a level deeper than its ``if``)."""
    deepest = depth
    for child in ast.iter_child_nodes(node):
        if isinstance(child, COMPOUND):
            is_elif = (
                isinstance(node, ast.If)
                and isinstance(child, ast.If)
                and node.orelse == [child]
                and child.col_offset == node.col_offset
            )
            inner = depth if is_elif else depth + 1
            deepest = max(deepest, nesting_depth(child, inner))
        elif not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            deepest = max(deepest, nesting_depth(child, depth))
    return deepest


def branch_points(node: ast.AST) -> int:
    count = 0
    for n in ast.walk(node):
        if isinstance(n, ast.If | ast.For | ast.AsyncFor | ast.While | ast.IfExp):
            count += 1
        elif isinstance(n, ast.ExceptHandler | ast.match_case):
            count += 1
        elif isinstance(n, ast.BoolOp):
            count += len(n.values) - 1
        elif isinstance(n, ast.comprehension):
            count += len(n.ifs)
    return count


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def find_worker_run(modules):
    for rel, tree in modules:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name == "Worker":
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "run":
                        return rel, item
    return None, None


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
    names += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
    return len([n for n in names if n not in ("self", "cls")])


# ----------------------------------------------------------------------------- figures


def source_figures(failure_functions: tuple[str, ...] = FAILURE_FUNCTIONS) -> list[Figure]:
    modules = package_modules()
    figures = []

    writes = status_writes(modules)
    files = sorted({rel for rel, _, _ in writes})
    figures.append(
        Figure(
            "a",
            "files that write Schedule.status",
            str(len(files)),
            "<= 2",
            len(files) <= 2,
            files,
        )
    )
    completed = [f"{rel}:{line}" for rel, line, done in writes if done]
    figures.append(
        Figure(
            "b",
            'sites that write "no slot left -> completed"',
            str(len(completed)),
            "1",
            len(completed) <= 1,
            completed,
        )
    )
    private = private_imports(modules)
    figures.append(
        Figure(
            "c",
            "relative imports of a sibling's _private name",
            str(len(private)),
            "<= 5",
            len(private) <= 5,
            private,
        )
    )

    rel, run = find_worker_run(modules)
    if run is None:
        figures.append(
            Figure(
                "d", "Worker.run: lines / depth / branch points", "not found", "<= 40 lines", False
            )
        )
    else:
        lines = _lines(run)
        figures.append(
            Figure(
                "d",
                "Worker.run: lines / nesting depth / branch points",
                f"{lines} / {nesting_depth(run)} / {branch_points(run)}",
                "<= 40 lines",
                lines <= 40,
                [f"{rel}:{run.lineno}"],
            )
        )

    state_functions = [
        (rel, fn) for rel, tree in modules if rel.startswith("state/") for fn in _functions(tree)
    ]
    rel, longest = max(state_functions, key=lambda pair: _lines(pair[1]))
    documented = ast.get_docstring(longest) is not None
    plan = [
        f"{r}:{fn.lineno} {fn.name} {_lines(fn)} lines, docstring: "
        f"{'yes' if ast.get_docstring(fn) else 'no'}"
        for r, fn in state_functions
        if fn.name in ("_plan_claim", "plan_claim")
    ]
    figures.append(
        Figure(
            "e",
            "longest state function",
            f"{longest.name} {_lines(longest)} lines, "
            f"{'documented' if documented else 'no docstring'}",
            "<= 60, documented",
            _lines(longest) <= 60 and documented,
            [f"{rel}:{longest.lineno} {longest.name}"] + (plan or ["_plan_claim: gone"]),
        )
    )

    found = [
        (rel, fn)
        for rel, tree in modules
        for fn in _functions(tree)
        if fn.name in failure_functions
    ]
    if not found:
        figures.append(
            Figure(
                "f",
                f"parameters of {' / '.join(failure_functions)}",
                "not found (name its replacement with --failure-function)",
                "<= 4",
                False,
            )
        )
    else:
        most = max(_parameters(fn) for _, fn in found)
        figures.append(
            Figure(
                "f",
                f"parameters of {' / '.join(sorted({fn.name for _, fn in found}))}",
                str(most),
                "<= 4",
                most <= 4,
                [f"{rel}:{fn.lineno} {fn.name} {_parameters(fn)}" for rel, fn in found],
            )
        )
    return figures


def _row_keys(row: object) -> set[object]:
    """What a declaration may name a row by: the row itself, or its id / key / name."""
    keys: set[object] = {id(row)}
    for attr in ("id", "key", "name"):
        value = getattr(row, attr, None)
        if isinstance(value, str) and value:
            keys.add(value)
    return keys


def _named(item: object) -> set[object]:
    """What one entry of a registry names: rows (by identity) or row ids."""
    if isinstance(item, str):
        return {item}
    if isinstance(item, list | tuple | set | frozenset):
        return set().union(*(_named(one) for one in item)) if item else set()
    named: set[object] = {id(item)}
    for attr in ("row", "rows", "id"):
        value = getattr(item, attr, None)
        if value is not None and value is not item:
            named |= _named(value)
    return named


def transition_figure() -> Figure:
    """(h), importing ``state.transitions`` (needs Django set up)."""
    import django_durable_schedules.state  # noqa: F401 (its rules fill the registry)
    from django_durable_schedules.state import transitions

    table = list(transitions.TABLE)
    registries = []
    for name in REGISTRY_NAMES:
        candidate = getattr(transitions, name, None)
        if candidate is not None:
            registries.append((name, candidate() if callable(candidate) else candidate))
    sites = []
    if registries:
        # Rules outside the state package (``ELSEWHERE``) declare rows too.
        elsewhere = getattr(transitions, "ELSEWHERE", None)
        if isinstance(elsewhere, dict):
            registries.append(("ELSEWHERE", elsewhere))
        named: set[object] = set()
        for _, registry in registries:
            entries = (
                [*registry.keys(), *registry.values()] if isinstance(registry, dict) else [registry]
            )
            for entry in entries:
                named |= _named(entry)
        untied = [row for row in table if not (_row_keys(row) & named)]
        tied = len(table) - len(untied)
        how = "rows a declaration names (" + ", ".join(name for name, _ in registries) + ")"
        sites = [how] + [f"no rule: {getattr(row, 'id', '') or row.event}" for row in untied]
    else:
        tied = sum(1 for row in table if any(getattr(row, f, None) for f in ROW_CODE_FIELDS))
        sites = ["rows naming code (no registry yet)"]
    return Figure(
        "h",
        "transition-table rows tied to code",
        f"{tied} of {len(table)}",
        "every row",
        tied == len(table),
        sites,
    )


SQL_PROBE = r"""
import json, os, sys
sys.path.insert(0, os.getcwd())
import django
django.setup()
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.contrib.auth import get_user_model

call_command("migrate", verbosity=0, interactive=False)
staff = get_user_model().objects.create_user("figures", is_staff=True)
client = Client()
client.force_login(staff)
body = {"name": "figures", "callback": "tests.noop", "kind": "interval",
        "interval_seconds": 60}
with CaptureQueriesContext(connection) as ctx:
    response = client.post("/api/schedules/", body, content_type="application/json")
print(json.dumps({"status": response.status_code,
                  "queries": [q["sql"] for q in ctx.captured_queries]}))
"""


def sql_figure(show_sql: bool = False) -> Figure:
    """(g): one API create, in a child process on a fresh SQLite database."""
    with tempfile.TemporaryDirectory(prefix="dds-figures-") as tmp:
        env = dict(os.environ)
        env.pop("DATABASE_URL", None)
        env.update(DJANGO_SETTINGS_MODULE="tests.settings", DDS_SQLITE_DIR=tmp)
        done = subprocess.run(
            [sys.executable, "-c", SQL_PROBE],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["?"]
        return Figure(
            "g", "SQL statements for one POST schedules/", f"error: {tail[0]}", "<= 18", False
        )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    count = len(report["queries"])
    ok = report["status"] == 201
    return Figure(
        "g",
        "SQL statements for one API POST schedules/ (SQLite, session and user lookups)",
        f"{count}" + ("" if ok else f" (HTTP {report['status']})"),
        "<= 18",
        ok and count <= 18,
        report["queries"] if show_sql else [],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 if a figure misses its goal")
    parser.add_argument("--skip-sql", action="store_true", help="do not measure (g)")
    parser.add_argument("--sites", action="store_true", help="list the sites behind each count")
    parser.add_argument("--show-sql", action="store_true", help="list (g)'s statements")
    parser.add_argument(
        "--failure-function",
        action="append",
        default=[],
        metavar="NAME",
        help="also measure (f) on this function (repeatable)",
    )
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    figures = source_figures(FAILURE_FUNCTIONS + tuple(args.failure_function))
    if args.skip_sql:
        figures.append(
            Figure("g", "SQL statements for one POST schedules/", "skipped", "<= 18", False)
        )
    else:
        figures.append(sql_figure(args.show_sql))
    try:
        import django

        django.setup()
        figures.append(transition_figure())
    except Exception as exc:  # the figure is reported, never a crash
        figures.append(
            Figure("h", "transition-table rows tied to code", f"error: {exc!r}", "every row", False)
        )
    figures.sort(key=lambda f: f.key)

    width = max(len(f.measure) for f in figures)
    value_width = max(len(f.value) for f in figures)
    for f in figures:
        verdict = "PASS" if f.passed else "FAIL"
        print(
            f"({f.key}) {f.measure:<{width}}  {f.value:<{value_width}}  goal {f.goal:<18} {verdict}"
        )
    if args.sites:
        for f in figures:
            if f.sites:
                print(f"\n({f.key}) {f.measure}:")
                for site in f.sites:
                    print(f"    {site}")
    missed = [f.key for f in figures if not f.passed]
    print(
        f"\n{len(figures) - len(missed)} of {len(figures)} figures meet their goal"
        + (f" (missed: {', '.join(missed)})" if missed else "")
    )
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
