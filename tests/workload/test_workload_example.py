"""The bundled example trace is kvviz's own generator output (regenerating it gives the same bytes)."""

from __future__ import annotations

from kvviz.analysis.workload.example import EXAMPLE_PATH, example_text


def test_bundled_example_equals_a_fresh_generation():
    assert EXAMPLE_PATH.read_text() == example_text()
    assert EXAMPLE_PATH.stat().st_size < 512 * 1024
