"""This process's own ``__main__`` (pytest's or an xdist worker's), recorded when tests/conftest.py imports this
module, before any test runs: Streamlit's script runner installs each page script an AppTest runs as
``sys.modules["__main__"]`` and never puts it back, and a spawned process re-runs that file."""

from __future__ import annotations

import sys

PROCESS_MAIN = sys.modules["__main__"]
