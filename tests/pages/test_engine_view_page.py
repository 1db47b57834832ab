"""AppTest of the Engine (live) page: a burst runs on the real engine; block tables, the step timeline, the
pool grid and a block's real K/V (heatmap and tokens) show up; with a host tier, both tiers, the journey and a
revealed prediction; without one, how to turn it on."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.engine import get_engine_loop
from kvviz_app.shell.i18n import texts

T = texts("engine_view")

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]


def test_burst_shows_block_tables_steps_and_block_kv():
    at = AppTest.from_file(str(ROOT / "pages" / "engine_view.py"), default_timeout=600).run()
    assert not at.exception, at.exception
    at.button(key="engine_burst").click().run()
    assert not at.exception, at.exception
    assert at.success and "6" in at.success[0].value
    tables = [df.value for df in at.dataframe if T.COL_TABLE in df.value.columns]
    assert tables and len(tables[0]) >= 1  # the burst is in the engine
    loop = get_engine_loop()
    assert loop.wait_idle(timeout=300)  # let it finish, then look again
    at.run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics[T.M_RUNNING] == "0" and metrics[T.M_HIT] != "—"
    assert at.selectbox(key="engine_block").options
    assert any(T.BLOCK_TOKENS.split("{")[0] in c.value for c in at.caption)


def test_api_requests_show_their_client_and_cached_tokens(monkeypatch):
    from types import SimpleNamespace

    from kvviz.server import embedded
    from kvviz.server.serving import ApiRequest

    done = ApiRequest("chatcmpl-1", "laptop-7", 36, 32, 7, "stop", 0.25, 0.0)
    app = SimpleNamespace(state=SimpleNamespace(serving=SimpleNamespace(recent=[done])))
    monkeypatch.setattr(embedded, "_STARTED", {"url": "http://127.0.0.1:8000", "app": app})
    at = AppTest.from_file(str(ROOT / "pages" / "engine_view.py"), default_timeout=600).run()
    assert not at.exception, at.exception
    api = [df.value for df in at.dataframe if T.COL_TTFT in df.value.columns]
    assert api and api[0][T.COL_CLIENT].tolist() == ["laptop-7"] and api[0][T.COL_CACHED].tolist() == [32]
    assert any("127.0.0.1:8000/v1" in c.value for c in at.caption)
    monkeypatch.setattr(embedded, "_STARTED", {})
    at = AppTest.from_file(str(ROOT / "pages" / "engine_view.py"), default_timeout=600).run()
    assert any(c.value == T.API_OFF for c in at.caption)


def test_without_a_host_tier_the_page_says_how_to_turn_it_on():
    assert get_engine_loop().engine.host is None  # the default app engine
    at = AppTest.from_file(str(ROOT / "pages" / "engine_view.py"), default_timeout=600).run()
    assert not at.exception, at.exception
    assert any(i.value == T.TIERS_OFF for i in at.info)
    assert "KVVIZ_KV_OFFLOADING_SIZE" in T.TIERS_OFF


def test_a_host_tier_shows_both_pools_the_journey_and_a_revealed_prediction(monkeypatch):
    from kvviz.engine import EngineConfig, EngineLoop, LLMEngine, SamplingParams
    from kvviz.engine import loop as loop_module
    from kvviz.engine.snapshot import tier_view
    from kvviz.model import load_model
    from kvviz.model.tokens import tokenize

    lm = load_model()
    info = lm.info
    token_bytes = 2 * info.num_layers * info.num_kv_heads * info.head_dim * info.element_size
    loop = EngineLoop(LLMEngine(lm, EngineConfig(kv_cache_bytes=9 * 16 * token_bytes, kv_offloading_size=0.05)))
    try:
        monkeypatch.setattr(loop_module, "_LOOP", loop)
        texts_ = [f"Story {i}: " + " ".join(f"word{i}x{j}" for j in range(12)) for i in range(3)]
        for i, text in enumerate([*texts_, texts_[0]]):  # the first prompt's blocks leave the 8-block pool
            loop.submit(f"t{i}", tokenize(text).ids, SamplingParams(max_tokens=2)).result()
        at = AppTest.from_file(str(ROOT / "pages" / "engine_view.py"), default_timeout=600).run()
        assert not at.exception, at.exception
        assert not any(i.value == T.TIERS_OFF for i in at.info)
        assert any(c.value == T.TIERS_CPU_ONLY for c in at.caption)  # the test machine runs on the CPU
        t = loop.call(tier_view)
        assert t.loaded > 0 and t.recent[0].request_id == "t3" and t.recent[0].host > 0
        counts = T.TIERS_COUNTS.format(dheld=t.device_held, dblocks=t.device_blocks, dfree=t.device_free,
                                       dcached=t.device_cached, in_host=t.cached_in_host, hheld=t.host_held,
                                       hblocks=t.host_blocks, hfree=t.host_free)
        assert any(c.value == counts for c in at.caption)
        at.toggle(key="predict_engine_view").set_value(True).run()
        assert any(i.value == texts("share").PREDICT_WAITING for i in at.info)  # the numbers wait for the guess
        assert not any(T.JOURNEY_HEADER in m.value for m in at.markdown)
        at.radio(key="predict_engine_guess").set_value(T.PREDICT_NO)
        at.button(key="predict_engine_reveal").click().run()
        assert not at.exception, at.exception
        assert at.success and f"request t3 found {t.recent[0].host:,}" in at.success[-1].value
        assert any(f"**{t.loaded:,}** loaded back" in m.value for m in at.markdown)
    finally:
        loop.close()


def test_a_bad_offloading_size_is_one_error_line(monkeypatch):
    from kvviz.engine import loop as loop_module

    monkeypatch.setattr(loop_module, "_LOOP", None)
    monkeypatch.setenv("KVVIZ_KV_OFFLOADING_SIZE", "lots")
    at = AppTest.from_file(str(ROOT / "pages" / "engine_view.py"), default_timeout=600).run()
    assert not at.exception, at.exception
    assert at.error and "KVVIZ_KV_OFFLOADING_SIZE" in at.error[0].value and loop_module._LOOP is None
