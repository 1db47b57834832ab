"""The block-table scenarios' own words stay true with and without the host tier: a step whose note speaks of
evicted blocks coming back says they are computed again or copied back from host memory, and the page shows
each step's note in the page's language (the notes are catalog entries like the titles and descriptions)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.scenarios.load import builtin_names, load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.analysis.scenarios.records import HOST_TIER_CHOICES
from kvviz_app.shell.i18n import translate, use_lang

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "block_table.py")
CYRILLIC = re.compile("[а-яё]", re.IGNORECASE)

#: (scenario, request, description too): a prompt that comes back after part of its earlier blocks were evicted
#: from the device, and whether the scenario's description tells that story as well
RETURNING = [("pool_pressure", "report-2", True), ("branching_prompts", "a-late-2", False)]


def _arrival(run, request_id: str) -> int:
    return next(k for k in range(1, run.num_steps + 1)
                if run.view_at(k).action.op == "add" and run.view_at(k).action.id == request_id)


@pytest.mark.parametrize("host", HOST_TIER_CHOICES)
@pytest.mark.parametrize(("name", "request_id", "described"), RETURNING)
def test_a_returning_prompts_note_names_what_really_happens(name, request_id, described, host):
    scenario = load_builtin(name).with_host_tier(host)
    run = play_scenario(scenario)
    k = _arrival(run, request_id)
    row = next(r for r in run.hits_by_source(k) if r.request_id == request_id)
    reusable = (row.prompt - 1) // scenario.block_size * scenario.block_size  # full blocks before the last token
    assert row.device < reusable  # the scenario shows what comes back after an eviction
    texts = [run.view_at(k).action.note] + ([scenario.description] if described else [])
    for text in texts:
        if row.host:  # loaded from host memory: "computed again" alone would be false
            assert "copied back from host memory" in text, (host, text)
        if row.device + row.host < reusable:  # some evicted block computed: "copied back" alone would be false
            assert "computed again" in text, (host, text)


def test_every_scenario_note_has_a_russian_translation():
    missing = [(name, s.note) for name in builtin_names() for s in load_builtin(name).steps
               if s.note and not CYRILLIC.search(translate(s.note, "ru"))]
    assert not missing, missing


def test_the_page_shows_the_steps_note_in_russian():
    run = play_scenario(load_builtin("pool_pressure").with_host_tier(16))
    k = _arrival(run, "report-2")
    app = AppTest.from_file(PAGE, default_timeout=120)
    app.session_state["bt_name"] = "pool_pressure"
    app.session_state["bt_host"] = 16
    app.session_state["bt_step"] = k
    app.query_params["lang"] = "ru"
    with use_lang("ru"):
        app.run()
    assert not app.exception, app.exception
    shown = [i.value for i in app.info]
    assert translate(run.view_at(k).action.note, "ru") in shown, shown
    assert all(CYRILLIC.search(v) for v in shown), shown
