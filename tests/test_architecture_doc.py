"""docs/architecture.md names every module of the package (issue #25: the layout it draws
must be true). The tree at the top of the doc is read by its indentation, each entry under
its folder, and compared with the package's modules (every ``.py`` but ``__init__.py`` and
``migrations/``): a module missing from the tree, or a tree entry with no module, fails.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "django_durable_schedules"
DOC = REPO / "docs" / "architecture.md"

# An entry: a file or folder name (or a short path, "contrib/prometheus.py") first on its line.
ENTRY = re.compile(r"^( *)((?:[A-Za-z_]\w*/)*(?:[A-Za-z_]\w*\.py|[A-Za-z_]\w*/))(?: |$)")


def tree_entries(text: str) -> set[str]:
    """The paths, relative to the repository, the first fenced block of ``text`` draws.

    A line is an entry when it starts with a name ending in ``.py`` or ``/`` indented at
    most two spaces deeper than the folder it would belong to; deeper lines are the
    wrapped descriptions of the entry above. A folder entry holds the entries indented
    under it.
    """
    block = text.split("```", 2)[1]
    entries: set[str] = set()
    stack: list[tuple[int, str]] = []  # (indent, folder path), innermost last
    for line in block.splitlines()[1:]:
        match = ENTRY.match(line)
        if not match:
            continue
        indent, name = len(match[1]), match[2]
        if stack and indent > stack[-1][0] + 2:
            continue  # a description that starts with a name
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = (stack[-1][1] if stack else "") + name
        entries.add(path.rstrip("/"))
        if name.endswith("/"):
            stack.append((indent, path))
    return entries


def package_modules() -> set[str]:
    """Every module of the package the doc must name, relative to the repository."""
    return {
        path.relative_to(REPO).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "migrations" not in path.relative_to(PACKAGE).parts
    }


def test_the_tree_names_every_module():
    missing = sorted(package_modules() - tree_entries(DOC.read_text()))
    assert not missing, "docs/architecture.md's tree lacks these modules:\n" + "\n".join(missing)


def test_the_tree_names_no_module_that_is_gone():
    gone = sorted(path for path in tree_entries(DOC.read_text()) if not (REPO / path).exists())
    assert not gone, "docs/architecture.md's tree names what does not exist:\n" + "\n".join(gone)


def test_entries_are_read_under_their_folder():
    """Indentation places an entry; a wrapped description naming a file is not an entry."""
    text = (
        "```\n"
        "pkg/\n"
        "  a.py         one\n"
        "  sub/         a folder\n"
        "    b.py         two, wrapped onto\n"
        "                 c.py, a description\n"
        "    deeper/      a folder in a folder\n"
        "      d.py         three\n"
        "  e/f.py       a short path\n"
        "```\n"
        "  g.py  after the tree\n"
    )
    assert tree_entries(text) == {
        "pkg",
        "pkg/a.py",
        "pkg/sub",
        "pkg/sub/b.py",
        "pkg/sub/deeper",
        "pkg/sub/deeper/d.py",
        "pkg/e/f.py",
    }
