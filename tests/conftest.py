"""Test-wide settings: offline, the repo on sys.path, a repo-local model cache folder, browser fixtures."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# The repo root (for ``import kvviz``) and tests/ (for ``import browser_util`` from tests/<layer>/).
for _path in (ROOT, TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning slows prefill.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("KVVIZ_CACHE_DIR", str(ROOT / ".cache" / "kvviz"))
# The app's in-process API (kvviz.server.embedded) stays off in tests: page tests must not bind port 8000.
os.environ.setdefault("KVVIZ_API", "0")

# The real-browser fixtures (app_server, browser) for every test module, with no import needed.
pytest_plugins = ["browser_util"]


@pytest.fixture(scope="session", autouse=True)
def _one_component_scan():
    """Every new AppTest scans all installed distributions for Streamlit v2 component manifests (about
    0.2 s CPU per page test here); the installed packages do not change during a test run, so the scan runs
    once per process. Only where a test module already imported Streamlit's AppTest."""
    if "streamlit.testing.v1" not in sys.modules:
        yield
        return
    scanner = importlib.import_module("streamlit.components.v2.manifest_scanner")
    original = scanner.scan_component_manifests
    found: dict[tuple, list] = {}

    def scan_once(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items())))
        if key not in found:
            found[key] = original(*args, **kwargs)
        return list(found[key])

    scanner.scan_component_manifests = scan_once
    yield
    scanner.scan_component_manifests = original


@pytest.fixture(scope="session", autouse=True)
def _one_compile_per_script():
    """Every AppTest run starts with an empty ScriptCache, so Streamlit re-reads the page, rewrites its AST
    for "magic" and compiles it (about 70 ms a run here). A compiled script is immutable: one compile per
    file version (path, mtime, size, magic setting) per process serves every run. Only where a test module
    already imported Streamlit's AppTest."""
    if "streamlit.testing.v1" not in sys.modules:
        yield
        return
    script_cache = importlib.import_module("streamlit.runtime.scriptrunner.script_cache")
    config = importlib.import_module("streamlit.config")
    original = script_cache.ScriptCache.get_bytecode
    compiled: dict[tuple, object] = {}

    def get_bytecode(self, script_path: str):
        path = os.path.abspath(script_path)
        stat = os.stat(path)
        key = (path, stat.st_mtime_ns, stat.st_size, config.get_option("runner.magicEnabled"))
        if key not in compiled:
            compiled[key] = original(self, path)
        return compiled[key]

    script_cache.ScriptCache.get_bytecode = get_bytecode
    yield
    script_cache.ScriptCache.get_bytecode = original


def pytest_sessionfinish(session, exitstatus):
    """Selecting no test is a mistake (a wrong path or -m expression), so it fails with status 1; pytest's
    status 5 ("no tests collected") never reaches make or CI."""
    if exitstatus == 5:  # pytest.ExitCode.NO_TESTS_COLLECTED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("error: no tests were selected (check the path and the -m expression)", red=True)
        session.exitstatus = 1
