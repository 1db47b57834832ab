"""Layering: every module of a layer is read (its source, lazy imports inside functions included) and
an import of a forbidden package fails the test, naming the module and the import.

kvviz/mirror (the engine mirror), the pure analyses (sizes, paging, scenarios, comparisons under kvviz/analysis)
and kvviz/util are pure Python (no torch, UI, model, UI text, processes or feature package); a page's figures
(kvviz_app/<page>/figures*.py) build Plotly figures without Streamlit or torch; kvviz/model is torch without
Streamlit and imports no feature package; a feature package (kvviz/experiments/..., kvviz/fleet, the workload
analyzer) imports no Streamlit.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Feature packages: experiments that combine the mirror and the model (a module or a package each).
FEATURES = ("kvviz.experiments.batching", "kvviz.experiments.edit", "kvviz.experiments.room", "kvviz.fleet",
            "kvviz.experiments.security", "kvviz.experiments.sessions", "kvviz.analysis.workload")
#: The pure layers: the mirror, the helpers and the analyses that need no model (packages or one-module layers).
PURE = ("kvviz/mirror", "kvviz/util", "kvviz/analysis/sizes", "kvviz/analysis/paging", "kvviz/analysis/scenarios",
        "kvviz/analysis/prompt_compare", "kvviz/analysis/radix_compare", "kvviz/analysis/providers",
        "kvviz/analysis/separation", "kvviz/analysis/timing_compare")
#: Every page's figure modules (Plotly only).
FIGURES = tuple(sorted(str(p.relative_to(ROOT).with_suffix("")) for p in (ROOT / "kvviz_app").glob("*/figures*.py")))
APP_ONLY = ("kvviz_app", "streamlit", "plotly")

FORBIDDEN: dict[str, tuple[str, ...]] = {
    **{pure: ("torch", "transformers", "subprocess", "kvviz.model", "kvviz.engine", "kvviz.cli", *APP_ONLY, *FEATURES)
       for pure in PURE},
    **{fig: ("streamlit", "torch", "transformers", "kvviz.model") for fig in FIGURES},
    "kvviz/model": ("kvviz.cli", *APP_ONLY, *FEATURES),
    **{feature.replace(".", "/"): ("streamlit", "kvviz.cli") for feature in FEATURES},
}

# Exceptions to FORBIDDEN, by module (none today: keep it that way).
ALLOWED: dict[str, set[str]] = {}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, anywhere in the file (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def layer_files(layer: str) -> list[Path]:
    """The modules of a layer: a package's files, or a one-module layer (``kvviz/analysis/providers`` is providers.py)."""
    base = ROOT / layer
    return sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]


def violations(layer: str) -> list[str]:
    found = []
    for path in layer_files(layer):
        mod = module_name(path)
        allowed = ALLOWED.get(mod, set())
        for name in sorted(imported_names(path)):
            for bad in FORBIDDEN[layer]:
                if (name == bad or name.startswith(bad + ".")) and bad not in allowed:
                    found.append(f"{mod} imports {name}")
    return sorted(set(found))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_nothing_forbidden(layer):
    assert all(path.is_file() for path in layer_files(layer)) and layer_files(layer)
    assert violations(layer) == []


def test_the_walk_sees_lazy_imports(tmp_path, monkeypatch):
    """The checker is not blind: an import inside a function body is found."""
    fake = ROOT / "kvviz" / "mirror" / "hashing.py"
    names = imported_names(fake)
    assert "cbor2" in names
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    import torch\n    from streamlit import session_state\n", encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert {"torch", "streamlit", "streamlit.session_state"} <= imported_names(probe)


FORMATTER_DEF = re.compile(r"\bdef\s+(?:fmt|format)\w*bytes")


def test_one_byte_formatter():
    """Bytes are formatted for people in one place, kvviz.util.units.format_bytes (no UI text in it)."""
    defs = []
    for path in sorted([*ROOT.glob("*.py"), *(ROOT / "kvviz_app").rglob("*.py"), *(ROOT / "kvviz").rglob("*.py")]):
        text = path.read_text(encoding="utf-8")
        if not FORMATTER_DEF.search(text):  # such a def must show as text: parse only the files that have one
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and "bytes" in node.name and node.name.startswith(("fmt", "format")):
                defs.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert defs == ["kvviz/util/units.py:format_bytes"]


def import_cycles(package: str) -> list[list[str]]:
    """Every cycle of imports among the modules of ``package`` (lazy imports inside functions counted)."""
    files = {module_name(path): path for path in sorted((ROOT / package).rglob("*.py"))}
    edges = {mod: sorted(name for name in imported_names(path) if name in files and name != mod)
             for mod, path in files.items()}
    cycles, done = [], set()

    def visit(mod: str, stack: list[str]) -> None:
        if mod in stack:
            cycles.append(stack[stack.index(mod):] + [mod])
            return
        if mod in done:
            return
        for nxt in edges[mod]:
            visit(nxt, [*stack, mod])
        done.add(mod)

    for mod in files:
        visit(mod, [])
    return cycles


@pytest.mark.parametrize("package", ["kvviz/mirror", "kvviz/engine"])
def test_no_import_cycle(package):
    """The engine mirror and the engine runtime read top to bottom: no module imports one that imports it back."""
    assert import_cycles(package) == []
