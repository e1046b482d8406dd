"""Import modules of ``bench/`` (the benches' judges and audits) in a test: the folder is
on ``sys.path`` only while they import, so the benches' own module names (``common``,
``seed``) never shadow anything else a test imports."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = str(Path(__file__).resolve().parent.parent / "bench")


def import_bench(*names: str) -> tuple[ModuleType, ...]:
    """The ``bench/`` modules ``names``, imported (``pytest.importorskip``: a bench whose
    optional dependency is missing skips the test module, as it would have)."""
    sys.path.insert(0, BENCH)
    try:
        return tuple(pytest.importorskip(name) for name in names)
    finally:
        sys.path.remove(BENCH)
