"""The package's import graph has no cycle (issue #25): the module-level imports between
the package's own modules (``TYPE_CHECKING`` blocks and imports inside functions left out:
they run after every module is loaded) form a DAG. A package's ``__init__`` counts as the
package; ``from . import x`` is an edge to the package and to ``x``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "django_durable_schedules"


def _top_level(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
            yield from _top_level(node.orelse)
        else:
            yield node


def import_graph() -> dict[str, set[str]]:
    """Module name -> the package modules it imports at module level."""
    modules: dict[str, tuple[Path, list[str]]] = {}
    for path in ROOT.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = ["django_durable_schedules", *path.relative_to(ROOT).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = parts
        else:
            package = parts[:-1]
        modules[".".join(parts)] = (path, package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, package) in modules.items():
        for node in _top_level(ast.parse(path.read_text()).body):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for candidate in [target, *(f"{target}.{a.name}" for a in node.names)]:
                    if candidate in modules and candidate != name:
                        graph[name].add(candidate)
            elif isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in modules} - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_package_imports_form_no_cycle():
    graph = import_graph()
    assert len(graph) > 100  # the walk found the package
    assert graph["django_durable_schedules.state"]  # and its imports
    assert cycles(graph) == []


def test_the_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
