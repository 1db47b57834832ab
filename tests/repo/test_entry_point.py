"""The entry point (app.py) is where the process-wide services start: the OpenAI-compatible API over the one
engine loop starts there, once per process, and the navigation only routes pages."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.repo.test_layers import imported_names

ROOT = Path(__file__).resolve().parents[2]


def _module_calls(path: Path) -> list[str]:
    """The names of the functions ``path`` calls at module level, in order."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.value.func.id for node in tree.body
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)]


def test_app_py_starts_the_api_then_runs_the_navigation():
    calls = _module_calls(ROOT / "app.py")
    assert "start_api_once" in calls and "main" in calls
    assert calls.index("prefer_passive_openmp") < calls.index("start_api_once") < calls.index("main")


def test_the_navigation_starts_no_server():
    names = imported_names(ROOT / "kvviz_app" / "shell" / "navigation.py")
    assert not [name for name in names if name.startswith("kvviz.server")]
