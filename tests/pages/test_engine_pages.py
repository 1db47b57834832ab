"""AppTests of the engine pages: the block-table player (defaults, Step forward/back, Play/Pause, Reset,
jump, scenario switch, add a request) and the radix tree vs hash chain page (defaults, step, settings).
Every displayed number is checked against the mirror's replayed state."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.radix_compare import compare_radix_pool
from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.analysis.scenarios.records import ScenarioStep
from kvviz_app.shell import ui
from kvviz_app.shell.i18n import texts

T = texts("block_table")
R = texts("radix")

ROOT = Path(__file__).resolve().parents[2]
BLOCK_PAGE = str(ROOT / "pages" / "block_table.py")
RADIX_PAGE = str(ROOT / "pages" / "radix.py")


def metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def step_shown(app: AppTest) -> str:
    return next(h.value for h in app.subheader if h.value.startswith("Step "))


def markdown_text(app: AppTest) -> str:
    return "\n".join(m.value for m in app.markdown)


@pytest.fixture
def bt() -> AppTest:
    app = AppTest.from_file(BLOCK_PAGE, default_timeout=120).run()
    assert not app.exception
    return app


def click(app: AppTest, key: str) -> AppTest:
    app.button(key=key).click().run()
    assert not app.exception, app.exception
    return app


def test_block_page_defaults(bt):
    assert step_shown(bt) == "Step 0 of 15"
    m = metrics(bt)
    assert m[T.COUNTERS["hit_tokens"][0]] == "0" and m[T.COUNTERS["running"][0]] == "0"
    assert T.STEP_START.format(blocks=24) in markdown_text(bt)
    assert bt.selectbox(key="bt_name").value == "shared_prompt"
    assert [b.key for b in bt.button if b.key and b.key.startswith("bt_")][-2:] == ["bt_play", "bt_reset_cache"]
    # which NONE_HASH seed is in force, and why (vLLM's default: sha256 with "vllm-none-hash")
    assert any("vllm-none-hash" in c.value and "cryptographic" in c.value for c in bt.caption)
    assert len(bt.get("plotly_chart")) >= 3  # pool, free queue, timeline (no block table yet)


def test_block_page_steps_forward_and_back(bt):
    run = play_scenario(load_builtin("shared_prompt"))
    for k in range(1, 7):
        click(bt, "bt_fwd")
        assert step_shown(bt) == f"Step {k} of 15"
    expected = run.view_at(6).counters
    m = metrics(bt)
    assert m[T.COUNTERS["hit_tokens"][0]] == f"{expected['hit_tokens']:,}" == "192"
    assert m[T.COUNTERS["shared_blocks"][0]] == "4" and m[T.COUNTERS["running"][0]] == "4"
    assert m[T.COUNTERS["hit_rate"][0]] == f"{expected['hit_rate']:.0%}"
    text = markdown_text(bt)
    assert "**u4** arrives: a 84-token prompt" in text
    assert ":green-badge[hit] **u4** · blocks 1, 2, 3, 4" in text  # one line per event, with why
    assert ":blue-badge[allocate]" in text and ":violet-badge[cache]" in text
    click(bt, "bt_back")
    assert step_shown(bt) == "Step 5 of 15"
    assert metrics(bt)[T.COUNTERS["running"][0]] == "3"
    click(bt, "bt_reset")
    assert step_shown(bt) == "Step 0 of 15"


def test_block_page_play_pause_and_end(bt):
    click(bt, "bt_play")  # Play advances one step at once; the timer advances the rest
    assert step_shown(bt) == "Step 1 of 15" and bt.session_state["bt_playing"] is True
    assert any(b.key == "bt_pause" for b in bt.button)
    click(bt, "bt_pause")
    assert bt.session_state["bt_playing"] is False and any(b.key == "bt_play" for b in bt.button)
    assert step_shown(bt) == "Step 1 of 15"
    click(bt, "bt_play")
    click(bt, "bt_fwd")  # stepping pauses the playback
    assert bt.session_state["bt_playing"] is False and step_shown(bt) == "Step 3 of 15"
    bt.slider(key="bt_jump").set_value(15).run()  # the jump slider
    assert step_shown(bt) == "Step 15 of 15" and T.AT_END.split(".")[0] in " ".join(c.value for c in bt.caption)
    click(bt, "bt_play")  # Play at the end starts over
    assert step_shown(bt) == "Step 1 of 15"


def test_block_page_refusal_and_scenario_switch(bt):
    bt.selectbox(key="bt_name").set_value("pool_pressure").run()
    assert step_shown(bt) == "Step 0 of 11"
    bt.slider(key="bt_jump").set_value(9).run()
    assert not bt.exception
    assert any("Refused" in e.value for e in bt.error)
    m = metrics(bt)
    view = play_scenario(load_builtin("pool_pressure")).view_at(9)
    assert m[T.COUNTERS["evictions"][0]] == str(view.counters["evictions"]) == "7"
    assert ":red-badge[refuse]" in markdown_text(bt)


def test_block_page_partial_block_jumps_to_the_head(bt):
    bt.selectbox(key="bt_name").set_value("pool_pressure").run()
    bt.slider(key="bt_jump").set_value(3).run()  # report-1 finishes: its partial last block 11 has no hash
    assert not bt.exception
    why = T.FREE_JUMP_WHY.format(ids="11", n=1)
    assert any(c.value == why for c in bt.caption)  # the one-sentence why beside the free queue
    assert why in markdown_text(bt)  # and in the event line


def test_block_page_reset_prefix_cache(bt):
    bt.slider(key="bt_jump").set_value(15).run()
    assert metrics(bt)[T.COUNTERS["running"][0]] == "0"
    click(bt, "bt_reset_cache")
    assert step_shown(bt) == "Step 16 of 16" and ":red-badge[reset]" in markdown_text(bt)
    assert "cached hashes dropped" in markdown_text(bt) and not bt.error
    assert bt.session_state["kvviz_user_steps"]["shared_prompt"][-1].op == "reset"
    # refused while a request holds blocks: a user's request that has not finished, then the button
    bt.session_state["kvviz_user_steps"] = {"shared_prompt": (ScenarioStep("add", "you1", (1, 2, 3)),)}
    bt.run()
    click(bt, "bt_reset_cache")
    assert step_shown(bt) == "Step 17 of 17"
    assert any("reset_prefix_cache refused: 1 block is still in use" in e.value for e in bt.error)


def test_block_page_add_a_request(bt):
    """Uses the real tokenizer: the user's question after the shared system prompt hits its blocks."""
    bt.text_area(key="bt_add_text").input("Do you have a branch in Lyon?")
    bt.text_input(key="bt_add_salt").input("")
    bt.button(key="FormSubmitter:bt_add_form-" + T.ADD_SUBMIT).click().run()
    assert not bt.exception and not bt.error, [e.value for e in bt.error]
    assert step_shown(bt) == "Step 16 of 16"
    assert "**you1** arrives" in markdown_text(bt)
    before = play_scenario(load_builtin("shared_prompt")).view_at(15).counters["hit_tokens"]
    assert metrics(bt)[T.COUNTERS["hit_tokens"][0]] == str(before + 64)  # the system prompt's four blocks hit
    # another tenant's salt: the same prompt shares nothing
    bt.text_area(key="bt_add_text").input("Do you have a branch in Lyon?")
    bt.text_input(key="bt_add_salt").input("tenant-b")
    bt.button(key="FormSubmitter:bt_add_form-" + T.ADD_SUBMIT).click().run()
    assert step_shown(bt) == "Step 17 of 17" and "(salt `tenant-b`)" in markdown_text(bt)
    assert metrics(bt)[T.COUNTERS["hit_tokens"][0]] == str(before + 64)  # unchanged: no hit for tenant-b
    # the radix page replays the same history, including these requests
    radix = AppTest.from_file(RADIX_PAGE, default_timeout=120)
    radix.session_state[ui.USER_STEPS_KEY] = bt.session_state[ui.USER_STEPS_KEY]
    radix.session_state["rx_name"] = "shared_prompt"
    radix.run()
    assert not radix.exception
    assert radix.slider(key="rx_step").max == 17
    click(bt, "bt_add_clear")
    assert step_shown(bt) == "Step 0 of 15"


def test_block_page_add_rejects_empty(bt):
    bt.button(key="FormSubmitter:bt_add_form-" + T.ADD_SUBMIT).click().run()
    assert not bt.exception and any(T.ADD_EMPTY in w.value for w in bt.warning)
    assert step_shown(bt) == "Step 0 of 15"


# ----------------------------------------------------------------------------- radix page


def test_radix_page_defaults_and_steps():
    app = AppTest.from_file(RADIX_PAGE, default_timeout=120).run()
    assert not app.exception
    comparison = compare_radix_pool(load_builtin("branching_prompts"), 32)
    assert app.selectbox(key="rx_name").value == "branching_prompts"
    assert app.slider(key="rx_step").value == 11  # the last arrival
    requests = comparison.requests_until(11)
    m = metrics(app)
    assert m[R.METRIC_RADIX] == R.METRIC_VALUE.format(tokens=sum(r.radix_tokens or 0 for r in requests))
    assert m[R.METRIC_POOL] == R.METRIC_VALUE.format(tokens=sum(r.pool_tokens or 0 for r in requests))
    assert m[R.METRIC_TAIL] == R.METRIC_VALUE.format(tokens=sum(r.partial_tail_tokens for r in requests)) != "0 tokens"
    assert len(app.get("plotly_chart")) == 2 and len(app.table) == 1 and len(app.dataframe) == 1  # per request, evictions
    labels = list(app.table[0].value[R.TABLE_COLUMNS["request"]])
    assert labels[0] == R.REQUEST_LABEL.format(id=requests[0].request_id, step=requests[0].step)  # as the chart's rows
    app.slider(key="rx_step").set_value(4).run()
    assert not app.exception and R.EVICTIONS_NONE in [c.value for c in app.caption]
    requests = comparison.requests_until(4)
    assert metrics(app)[R.METRIC_RADIX] == R.METRIC_VALUE.format(tokens=77)
    app.slider(key="rx_step").set_value(0).run()
    assert not app.exception and metrics(app)[R.METRIC_POOL] == "0 tokens"


def test_radix_page_settings_and_pressure():
    app = AppTest.from_file(RADIX_PAGE, default_timeout=120).run()
    app.selectbox(key="rx_name").set_value("pool_pressure").run()
    assert not app.exception and app.slider(key="rx_step").value == 9
    assert any("refused" in w.value for w in app.warning)
    app.selectbox(key="rx_window").set_value(64).run()
    app.selectbox(key="rx_page").set_value(16).run()
    assert not app.exception
    comparison = compare_radix_pool(load_builtin("pool_pressure"), 64, 16)
    requests = comparison.requests_until(9)
    assert metrics(app)[R.METRIC_WINDOW] == R.METRIC_VALUE.format(tokens=sum(r.window_tokens or 0 for r in requests))
    engines = set(app.dataframe[0].value[R.EVICTION_COLUMNS["engine"]])
    assert engines == {R.ENGINE_LABELS[e] for e in ("radix", "pool", "window")}
