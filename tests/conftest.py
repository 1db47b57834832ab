"""Test-wide settings: offline, the repo on sys.path, a repo-local model cache folder, browser fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# The repo root (for ``import kvviz``) and tests/ (for ``import browser_util`` from tests/<layer>/).
for _path in (ROOT, TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import main_module_util  # noqa: E402, F401 - records this process's own __main__ before any AppTest replaces it

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

# No Streamlit internals are patched here. Each AppTest therefore scans the installed packages
# for component manifests and compiles its page script afresh: measured on this shared machine (load 12-13),
# the fast lane's page tests took 47.5 s of CPU instead of 23.5 s with the old per-process caches (81 s ->
# 157 s wall in one process). Accepted: about +12 s of the fast lane on CI's two cores, and a similar share
# of the model lane's page tests.


def pytest_sessionfinish(session, exitstatus):
    """Selecting no test is a mistake (a wrong path or -m expression), so it fails with status 1; pytest's
    status 5 ("no tests collected") never reaches make or CI."""
    if exitstatus == 5:  # pytest.ExitCode.NO_TESTS_COLLECTED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("error: no tests were selected (check the path and the -m expression)", red=True)
        session.exitstatus = 1
