"""The engine mirror and the pure analyses are pure Python: importing it (and its CLI commands) never pulls in torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "kvviz.mirror", "kvviz.analysis.sizes", "kvviz.analysis.paging", "kvviz.analysis.scenarios", "kvviz.util", "kvviz.mirror.hashing", "kvviz.mirror.events", "kvviz.mirror.block_pool", "kvviz.mirror.manager",
    "kvviz.mirror.radix", "kvviz.analysis.prompt_compare", "kvviz.analysis.scenarios.block_trace", "kvviz.cli.hash", "kvviz.cli.diff",
    "kvviz.cli.simulate", "kvviz_app.shell.text_concepts",
]


def test_mirror_and_pure_analyses_import_no_torch_or_streamlit():
    code = (
        "import importlib, json, sys\n"
        f"for name in {MODULES!r}: importlib.import_module(name)\n"
        "from kvviz.cli import main\n"
        "main(['hash', '--tokens', '1,2,3', '--json'])\n"
        "main(['simulate', '--trace', 'assets/traces/shared_prefix.json', '--json'])\n"
        "print(json.dumps(sorted(m for m in ('torch', 'streamlit', 'transformers') if m in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []
