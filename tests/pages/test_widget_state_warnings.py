"""AppTest: a link that sets a widget's value logs no Streamlit warning (a widget given both a default
value and a Session State value logs one, with a stack, into the presenter's terminal)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from streamlit.elements.lib import policies
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
DUPLICATE = "created with a default value but also had its value set via the Session State API"

# (page, link): each sets the widgets that logged the warning: the guided path's calculator step and
# every shareable Sessions value.
LINKS = [
    ("calculator", {"mode": "preset", "preset": "llama-2-7b", "tokens": "1000", "batch": "100"}),
    ("calculator", {"tokens": "8192", "batch": "7", "dtype": "fp8", "budget": "custom", "gib": "12.5",
                    "block": "32", "reserve": "8"}),
    ("sessions", {"session": "agent", "policy": "anthropic-5m", "min": "512", "turns": "100", "pause": "1",
                  "pause_turn": "3", "pause_min": "30", "marks": "system"}),
    ("paging", {"memory": "16384", "requests": "20", "prompt": "10-200", "sharing": "0", "step": "5"}),
    ("radix", {"scenario": "pool_pressure", "window": "64", "page": "4"}),
    ("radix", {"window": "64"}),
]


@pytest.mark.parametrize(("page", "link"), LINKS)
def test_a_link_logs_no_duplicate_widget_value_warning(page, link, monkeypatch, caplog):
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)  # Streamlit logs it once a process
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=120)
    for key, value in link.items():
        at.query_params[key] = value
    with caplog.at_level(logging.WARNING):
        at.run()
    assert not at.exception
    logged = [r.getMessage() for r in caplog.records if DUPLICATE in r.getMessage()]
    assert not logged, logged
