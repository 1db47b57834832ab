"""A model the engine refuses (another architecture, loaded through transformers) stops only the pages that
need the engine, with the refusal worded on the page, never a traceback (the engine pages call
``engine_loop_or_stop``)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from kvviz.errors import CodedError
from kvviz_app.shell.i18n import texts

T = texts("engine_view")


def _page() -> None:
    import streamlit as st

    from kvviz_app.shell.page_engine import engine_loop_or_stop

    engine_loop_or_stop()
    st.write("the engine ran")


def test_the_engines_refusal_is_shown_and_the_page_stops(monkeypatch):
    params = {"model": "gpt2", "architecture": "GPT2LMHeadModel"}

    def refuse():
        raise CodedError("the engine runs the native Llama decoder", "engine_unsupported_model", **params)

    monkeypatch.setattr("kvviz_app.shell.page_engine.get_engine_loop", refuse)
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [T.UNSUPPORTED.format(**params)]
    assert not any("the engine ran" in m.value for m in at.markdown)


def test_other_engine_errors_are_not_swallowed(monkeypatch):
    def broken():
        raise CodedError("KV budget too small", "bad_engine_setting", name="kv_cache_bytes", value="1", high=1)

    monkeypatch.setattr("kvviz_app.shell.page_engine.get_engine_loop", broken)
    at = AppTest.from_function(_page, default_timeout=60).run()
    assert at.exception and "KV budget too small" in at.exception[0].message


def test_the_apps_engine_takes_the_host_tiers_eviction_policy_from_the_environment(monkeypatch):
    from kvviz.engine import loop as loop_module

    built = {}

    class Engine:
        def __init__(self, model, config):
            built["config"] = config

    monkeypatch.setattr(loop_module, "_LOOP", None)
    monkeypatch.setattr(loop_module, "LLMEngine", Engine)
    monkeypatch.setattr(loop_module, "EngineLoop", lambda engine: engine)
    monkeypatch.setattr("kvviz.model.load_model", lambda: None)
    monkeypatch.setenv("KVVIZ_KV_OFFLOADING_SIZE", "0.25")
    monkeypatch.setenv("KVVIZ_KV_OFFLOADING_EVICTION_POLICY", "arc")
    loop_module.get_engine_loop()
    config = built["config"]
    assert (config.kv_offloading_size, config.kv_offloading_eviction_policy) == (0.25, "arc")


def test_a_bad_eviction_policy_is_one_error_line_on_an_engine_page(monkeypatch):
    from kvviz.engine import loop as loop_module

    monkeypatch.setattr(loop_module, "_LOOP", None)
    monkeypatch.setattr("kvviz.model.load_model", lambda: (_ for _ in ()).throw(AssertionError("loaded a model")))
    monkeypatch.setenv("KVVIZ_KV_OFFLOADING_EVICTION_POLICY", "mru")
    for lang in ("en", "ru"):
        at = AppTest.from_function(_page, default_timeout=60)
        at.query_params["lang"] = lang
        at.run()
        assert not at.exception, at.exception
        words = texts("common", lang).INPUT_ERRORS["bad_env_kv_offloading_policy"]
        assert [e.value for e in at.error] == [words], (lang, [e.value for e in at.error])
        assert "KVVIZ_KV_OFFLOADING_EVICTION_POLICY" in words and loop_module._LOOP is None
