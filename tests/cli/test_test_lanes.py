"""The test lanes themselves: an empty selection fails (never pytest's exit status 5), and the fast lane
(`make test-fast`) really leaves out the model and browser tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def pytest_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_selecting_nothing_fails_with_status_1_not_5():
    proc = pytest_run("tests/core/test_limits.py", "-m", "no_such_marker")
    assert proc.returncode == 1, proc.stdout[-500:]
    assert "no tests were selected" in proc.stdout


def test_fast_lane_leaves_out_model_and_browser_tests():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert '-m "not model and not browser"' in makefile
    # every browser test and every test of a model-only module is deselected: nothing is left
    proc = pytest_run("--collect-only", "-q", "-m", "not model and not browser", "tests/browser/test_paging_browser.py", "tests/model/test_reuse.py")
    assert proc.returncode == 1 and "::" not in proc.stdout, proc.stdout[-500:]
    assert "no tests were selected" in proc.stdout
    everything = pytest_run("--collect-only", "-q", "tests/browser/test_paging_browser.py", "tests/model/test_reuse.py")
    assert everything.returncode == 0 and "tests/model/test_reuse.py: " in everything.stdout  # the paths hold tests


def test_tests_live_by_layer_with_unique_basenames():
    """tests/<layer>/test_*.py only, no __init__.py (so basenames must be unique across layers)."""
    layers = {"core", "model", "pages", "browser", "cli"}
    files = sorted((ROOT / "tests").rglob("test_*.py"))
    assert files and all(f.parent.parent == ROOT / "tests" and f.parent.name in layers for f in files), files
    names = [f.name for f in files]
    assert len(names) == len(set(names))
    assert not list((ROOT / "tests").rglob("__init__.py"))
