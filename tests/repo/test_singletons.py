"""Every piece of process-wide state is named in one place: docs/ARCHITECTURE.md's "Process-wide singletons".

Process-wide state here is a private module-level name that some function rebinds (``global``), or that starts
as an empty container and is filled at run time (``{}``, ``dict()``, ``OrderedDict()``, ``[]``, ``set()``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_EMPTY_CALLS = {"dict", "OrderedDict", "list", "set", "defaultdict"}


def _is_empty_container(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Dict | ast.List | ast.Set):
        return not getattr(node, "keys", None) and not getattr(node, "elts", None)
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in _EMPTY_CALLS
    return False


def process_state(path: Path) -> set[str]:
    """The module-level names of ``path`` that hold process-wide state."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {name for node in ast.walk(tree) if isinstance(node, ast.Global) for name in node.names}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _is_empty_container(node.value):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and _is_empty_container(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {name for name in names if name.startswith("_")}


def documented() -> str:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    match = re.search(r"^## Process-wide singletons\n(.*?)^## ", text, flags=re.S | re.M)
    assert match, "docs/ARCHITECTURE.md has no 'Process-wide singletons' section"
    return match.group(1)


def test_every_process_wide_holder_is_documented():
    section = documented()
    missing = [f"{path.relative_to(ROOT)}:{name}"
               for package in ("kvviz", "kvviz_app") for path in sorted((ROOT / package).rglob("*.py"))
               for name in sorted(process_state(path)) if f"`{name}`" not in section and f" {name}`" not in section
               and f"`{name}," not in section]
    assert missing == []


def test_the_check_sees_a_global_and_an_empty_cache(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("_A: dict[str, int] = {}\n_B = OrderedDict()\n_C = {'x': 1}\n_D = None\nPUBLIC = {}\n"
                     "def f():\n    global _D\n    _D = 1\n", encoding="utf-8")
    assert process_state(probe) == {"_A", "_B", "_D"}
