"""Every other model of a prefix cache says, in its module docstring's first line, why it is not the mirror."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The models of a prefix cache besides the mirror's vLLM block pool (kvviz/mirror: hashing, block pool, manager).
OTHER_MODELS = ("kvviz/mirror/radix.py", "kvviz/mirror/radix_engine.py", "kvviz/fleet/engine_model.py",
                "kvviz/analysis/paging/__init__.py", "kvviz/analysis/paging/alloc.py", "kvviz/analysis/providers.py")


@pytest.mark.parametrize("path", OTHER_MODELS)
def test_first_line_says_why_it_is_not_the_mirror(path):
    doc = ast.get_docstring(ast.parse((ROOT / path).read_text(encoding="utf-8"))) or ""
    first = doc.splitlines()[0] if doc else ""
    assert "not the mirror" in first or "not vLLM's" in first or "not the mirror's" in first, first
