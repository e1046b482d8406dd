"""Modules talk through public names (issue #25, item 5; docs/architecture.md).

A name another module uses has no leading underscore; what is private to a package lives in
an underscore *module* (``timing/_grid.py``), whose names its siblings import freely. Read
from the source with :mod:`ast`:

* a private name crosses a module when one module of the package imports it from another
  (``from .x import _name``, ``from django_durable_schedules.x import _name``) or reads it as
  an attribute of a package module it imported (``zones._zone``), and when a module outside
  a package imports one of its underscore modules or a name from one. Importing an
  underscore module inside its package (``from . import _grid``) is not a crossing. Dunders
  are not private names.
  The count is a ratchet: it may not exceed :data:`CEILING`, which goes down as the seams
  are cut (the goal is 5), and a failure lists the crossings.
* 400-500 lines is a guideline for a module, not a rule: the modules over 500 lines are
  reported as a warning, never a failure.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "django_durable_schedules"
DOTTED = "django_durable_schedules"

#: The most private names that may cross a module. Lower it whenever a change cuts seams;
#: never raise it (make the name public, or move it into an underscore module, instead).
CEILING = 0

#: A module over this many lines is reported (the guideline is 400-500).
GUIDELINE_LINES = 500


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package but its migrations."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] == "migrations":
            continue
        parts = [DOTTED, *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The dotted module ``node`` imports from, as seen from module ``importer``."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _outside(importer: str, module: str) -> bool:
    """Whether ``importer`` is outside the package that the underscore module ``module``
    (or a module under one) is private to; False when ``module`` is not private."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _is_private(part):
            return importer.split(".")[:i] != parts[:i]
    return False


def crossings(package: Path = PACKAGE) -> list[str]:
    """``path:line name`` for each private name that crosses a module."""
    modules = _package_modules(package)
    found = []
    for dotted, path in modules.items():
        rel = path.relative_to(package).as_posix()
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), rel)
        aliases: dict[str, str] = {}  # local name -> a package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _resolve(dotted, is_package, node)
                if source != DOTTED and not source.startswith(DOTTED + "."):
                    continue
                for alias in node.names:
                    target = f"{source}.{alias.name}"
                    if target in modules:
                        aliases[alias.asname or alias.name] = target
                        private = _outside(dotted, target)
                    else:
                        private = _is_private(alias.name) or _outside(dotted, source)
                    if private:
                        found.append(f"{rel}:{node.lineno} {target}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        aliases[alias.asname] = alias.name
                    if _outside(dotted, alias.name):
                        found.append(f"{rel}:{node.lineno} {alias.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _is_private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and aliases[node.value.id] != dotted
            ):
                found.append(f"{rel}:{node.lineno} {aliases[node.value.id]}.{node.attr}")
    return found


def test_no_more_private_names_cross_modules_than_the_ceiling():
    found = crossings()
    listing = "\n".join(found)
    assert len(found) <= CEILING, (
        f"{len(found)} private names cross a module (ceiling {CEILING}): make each public "
        f"or keep it inside its module:\n{listing}"
    )


def test_the_ceiling_is_not_slack():
    """When seams are cut, the ceiling comes down with them (the ratchet holds the gain)."""
    assert len(crossings()) == CEILING, f"lower CEILING to {len(crossings())}"


def test_crossings_are_found(tmp_path):
    """The reader sees each form of crossing and passes underscore modules and dunders."""
    pkg = tmp_path / DOTTED
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sub import _shared\n__all__ = []\n")
    (pkg / "sub" / "__init__.py").write_text("from . import _inner, zones\nzones._zone\n")
    (pkg / "sub" / "_inner.py").write_text("PUBLIC = 1\n")
    (pkg / "sub" / "zones.py").write_text("_zone = 1\n_self = _zone\n")
    (pkg / "sub" / "_shared.py").write_text(
        "from django_durable_schedules.sub.zones import _zone\nfrom .zones import __doc__\n"
        "from ._inner import PUBLIC\n"
    )
    (pkg / "other.py").write_text(
        "from .sub._inner import PUBLIC\nfrom .sub import _inner\n"
        "import django_durable_schedules.sub._inner as inner\n"
    )
    assert sorted(crossings(pkg)) == [
        f"__init__.py:1 {DOTTED}.sub._shared",
        f"other.py:1 {DOTTED}.sub._inner.PUBLIC",
        f"other.py:2 {DOTTED}.sub._inner",
        f"other.py:3 {DOTTED}.sub._inner",
        f"sub/__init__.py:2 {DOTTED}.sub.zones._zone",
        f"sub/_shared.py:1 {DOTTED}.sub.zones._zone",
    ]


def test_module_length_is_a_guideline():
    lengths = {
        path.relative_to(PACKAGE).as_posix(): len(path.read_text().splitlines())
        for path in _package_modules().values()
    }
    long = {rel: n for rel, n in sorted(lengths.items()) if n > GUIDELINE_LINES}
    if long:
        warnings.warn(
            f"modules over {GUIDELINE_LINES} lines (the guideline is 400-500): {long}",
            stacklevel=1,
        )
