"""AppTest: page state restored from the URL (good and hostile values), written back, presenter mode.

Pages without the model: calculator, paging, radix, block table, sessions. The Edit page (model) is in
tests/pages/test_share_edit_page.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent.parent
HOSTILE = ["<script>alert(1)</script>", "1e309", "nan", "-1", "99999999999999999999999", "' OR 1=1 --",
           "%00", "x" * 9000, ["1", "2"]]


def _page(name: str, params: dict) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / f"{name}.py"), default_timeout=120)
    for key, value in params.items():
        at.query_params[key] = value
    return at.run()


def _query(at: AppTest) -> dict:
    return {k: v for k, v in at.query_params.items()}


def _charts(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_calculator_restores_typed_numbers_and_budget():
    at = _page("calculator", {"mode": "typed", "layers": "61", "kv_heads": "1", "head_dim": "576", "dtype": "fp8",
                              "tokens": "8192", "batch": "7", "budget": "custom", "gib": "12.5"})
    assert not at.exception and not at.warning
    assert at.number_input(key="calc_layers").value == 61
    assert at.number_input(key="calc_head_dim").value == 576
    assert at.radio(key="calc_dtype").value == "fp8"
    assert at.select_slider(key="calc_context").value == 8192
    assert at.slider(key="calc_batch").value == 7
    assert at.number_input(key="calc_budget_custom").value == 12.5
    query = _query(at)
    assert query["layers"] == "61" and query["batch"] == "7" and query["budget"] == "custom"
    assert "heads" not in query  # defaults stay out of the link

    at.slider(key="calc_batch").set_value(9).run()  # a changed widget is written back, not undone
    assert at.slider(key="calc_batch").value == 9 and _query(at)["batch"] == "9"


def test_calculator_preset_from_url():
    at = _page("calculator", {"mode": "preset", "preset": "llama-3-8b"})
    assert not at.exception
    assert at.selectbox(key="calc_preset").value == "llama-3-8b"


@pytest.mark.parametrize("bad", HOSTILE)
def test_calculator_hostile_values_fall_back_with_a_notice(bad):
    params = {name: bad for name in ("mode", "preset", "layers", "gib", "tokens", "batch", "dtype", "budget")}
    at = _page("calculator", params)
    assert not at.exception
    assert at.warning and "cannot use" in at.warning[0].value
    assert at.slider(key="calc_batch").value == 100 and at.radio(key="calc_dtype").value == "fp16"
    assert at.selectbox(key="calc_preset").value == "llama-2-7b"


def test_paging_restores_and_rejects():
    at = _page("paging", {"memory": "4096", "block": "32", "prompt": "10-20", "reservation": "oracle", "seed": "7",
                          "sharing": "0", "step": "5"})
    assert not at.exception and not at.warning
    assert at.select_slider(key="pg_memory").value == 4096
    assert at.slider(key="pg_prompt").value == (10, 20)
    assert at.radio(key="pg_reservation").value == "oracle"
    assert at.checkbox(key="pg_sharing").value is False
    assert at.slider(key="pg_step").value == 5
    at = _page("paging", {"memory": "3000", "prompt": "20-10", "requests": "301", "step": "-4"})
    assert not at.exception and at.warning
    for name in ("memory", "prompt", "requests", "step"):
        assert name in at.warning[0].value
    assert at.select_slider(key="pg_memory").value == 8192


def test_block_table_restores_scenario_and_step():
    at = _page("block_table", {"scenario": "pool_pressure", "step": "4"})
    assert not at.exception and not at.warning
    assert at.selectbox(key="bt_name").value == "pool_pressure"
    assert at.session_state["bt_step"] == 4
    assert _query(at)["step"] == "4"
    at = _page("block_table", {"scenario": "no_such_scenario", "step": "100000"})
    assert not at.exception and "scenario" in at.warning[0].value
    assert at.session_state["bt_step"] == at.session_state["bt_nsteps"]  # clamped to the last step


def test_radix_and_sessions_restore():
    at = _page("radix", {"scenario": "pool_pressure", "window": "64", "page": "16", "step": "3"})
    assert not at.exception and not at.warning
    assert at.selectbox(key="rx_window").value == 64 and at.slider(key="rx_step").value == 3
    at = _page("sessions", {"policy": "bogus", "turns": "100"})
    assert not at.exception and "policy" in at.warning[0].value
    assert at.slider(key="ss_project").value == 100


def test_presenter_mode_from_url_folds_text_and_puts_the_picture_first():
    at = _page("paging", {"present": "1"})
    assert not at.exception
    assert any(e.label == "Explanation" for e in at.expander)
    css = " ".join(m.value for m in at.markdown if "<style>" in m.value)
    assert "font-size: 18px" in css
    first = _charts(at)[0]
    assert first["layout"]["font"]["size"] >= 16  # the key picture: chart text of 16 px or more
    assert _query(at)["present"] == "1"  # carried along in the page's link

    plain = _page("paging", {})
    assert not any(e.label == "Explanation" for e in plain.expander)
    assert _charts(plain)[0]["layout"]["font"].get("size", 12) < 16


@pytest.mark.model
def test_presenter_mode_on_the_landing_page_shows_the_join_panel_and_paths():
    at = _page("home", {"present": "1", "path": "workshop"})
    assert not at.exception
    assert any("Join" in s.value for s in at.subheader)
    assert at.session_state["kvviz_path"] == "workshop"
    text = " ".join(c.value for c in at.caption)
    assert "Ask:" in text and "45 minutes" in text


def test_block_table_predicts_the_next_eviction():
    from kvviz.analysis.scenarios.load import load_builtin
    from kvviz.analysis.scenarios.play import play_scenario

    run = play_scenario(load_builtin("pool_pressure"))
    k = next(i for i in range(run.num_steps) if any(e.kind.value == "evict" for e in run.view_at(i + 1).events))
    evicted = next(e.block_ids[0] for e in run.view_at(k + 1).events if e.kind.value == "evict")
    at = _page("block_table", {"scenario": "pool_pressure", "step": str(k), "path": "self"})
    assert not at.exception and at.toggle(key="predict_block_table").value is True
    wrong = next(b for b in run.view_at(k).state.free_queue if b != evicted)
    at.selectbox(key=f"predict_evict_pool_pressure_{k}").set_value(wrong).run()
    at.button(key="bt_fwd").click().run()
    assert not at.exception and at.session_state["bt_step"] == k + 1
    assert any(f"engine evicted block {evicted}" in w.value for w in at.warning)

    at = _page("block_table", {"scenario": "pool_pressure", "step": str(k), "present": "1"})
    assert at.toggle(key="predict_block_table").value is False  # off in presenter mode
