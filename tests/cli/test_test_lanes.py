"""The test lanes themselves: an empty selection fails (never pytest's exit status 5), and the fast lane
(`make test-fast`) really leaves out the model and browser tests."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LANE_FILES = ("tests/browser/test_paging_browser.py", "tests/model/test_reuse.py")  # a browser and a model-only module


class Selection:
    """A plugin that records which collected tests a run kept and which its -m expression deselected."""

    def __init__(self) -> None:
        self.selected: list[str] = []
        self.deselected: list[str] = []

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += [item.nodeid for item in items]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.selected = [item.nodeid for item in session.items]


def pytest_run(*args: str) -> tuple[int, Selection]:
    """pytest run in this process (the modules are imported already: no second interpreter, no second torch
    import) from the repo root, with this repo's conftest; its output goes to the caller's capture."""
    probe = Selection()
    code = pytest.main(["-p", "no:cacheprovider", "--rootdir", str(ROOT), *(str(ROOT / a) if a.startswith("tests/") else a
                                                                           for a in args)], plugins=[probe])
    return int(code), probe


def test_selecting_nothing_fails_with_status_1_not_5(capsys: pytest.CaptureFixture) -> None:
    code, probe = pytest_run("tests/mirror/test_limits.py", "-m", "no_such_marker")
    out = capsys.readouterr().out
    assert code == 1, out[-500:]
    assert "no tests were selected" in out and probe.deselected and not probe.selected


def test_fast_lane_leaves_out_model_and_browser_tests(capsys: pytest.CaptureFixture) -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert '-m "not model and not browser"' in makefile
    # every browser test and every test of a model-only module is deselected: nothing is left
    code, probe = pytest_run("--collect-only", "-q", "-m", "not model and not browser", *LANE_FILES)
    out = capsys.readouterr().out
    assert code == 1 and not probe.selected and "no tests were selected" in out, out[-500:]
    for path in LANE_FILES:  # the paths hold tests, and all of them were deselected
        assert any(node.startswith(path + "::") for node in probe.deselected), (path, probe.deselected[:3])


def test_tests_live_by_layer_with_unique_basenames():
    """tests/<layer>/test_*.py only, no __init__.py (so basenames must be unique across layers)."""
    layers = {"mirror", "analysis", "util", "app", "fleet", "workload", "features", "repo", "model", "engine", "server",
              "pages", "browser", "cli", "peer"}
    files = sorted((ROOT / "tests").rglob("test_*.py"))
    assert files and all(f.parent.parent == ROOT / "tests" and f.parent.name in layers for f in files), files
    names = [f.name for f in files]
    assert len(names) == len(set(names))
    assert not list((ROOT / "tests").rglob("__init__.py"))
