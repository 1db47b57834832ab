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

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning slows prefill.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("KVVIZ_CACHE_DIR", str(ROOT / ".cache" / "kvviz"))

# The real-browser fixtures (app_server, browser) for every test module, with no import needed.
pytest_plugins = ["browser_util"]
