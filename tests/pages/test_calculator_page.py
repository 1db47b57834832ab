"""AppTest of the KV-bytes calculator page: presets, typed numbers, pasted/uploaded config.json,
clear errors for bad input, and (marked ``model``) the cross-check against the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.analysis.sizes.hf_config import MAX_CONFIG_BYTES
from kvviz.analysis.sizes.presets import CONFIG_DIR, PRESETS

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "calculator.py")


@pytest.fixture
def at() -> AppTest:
    app = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not app.exception
    return app


def metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def test_default_page_shows_the_articles_llama_figures(at):
    m = metrics(at)
    assert m["KV per token"] == "512 KiB"
    assert m["One request (1,000 tokens)"] == "500 MiB"
    assert m["100 requests"] == "≈48.83 GiB"
    assert m["Attention"] == "MHA"
    captions = " ".join(c.value for c in at.caption)
    assert "524,288 B" in captions and "524,288,000 B" in captions and "52,428,800,000 B" in captions
    formula = at.latex[0].value
    assert r"\underbrace{32}_{\text{layers}}" in formula and "524{,}288" in formula and "512" in formula
    assert "52{,}428{,}800{,}000" in at.latex[1].value
    assert len(at.get("plotly_chart")) == 6
    assert not at.error


def test_formula_updates_live_with_dtype_and_sliders(at):
    at.radio(key="calc_dtype").set_value("fp32").run()
    assert metrics(at)["KV per token"] == "1 MiB"
    assert r"4\,\text{B}" in at.latex[0].value
    at.select_slider(key="calc_context").set_value(4096).run()
    at.slider(key="calc_batch").set_value(10).run()
    m = metrics(at)
    assert m["One request (4,096 tokens)"] == "4 GiB" and m["10 requests"] == "40 GiB"


def test_every_preset_renders(at):
    for preset in PRESETS:
        at.selectbox(key="calc_preset").set_value(preset.key).run()
        assert not at.exception, preset.key
        assert not at.error, preset.key
    at.selectbox(key="calc_preset").set_value("qwen3.6-27b").run()
    assert metrics(at)["KV per token"] == "64 KiB"
    text = " ".join(i.value for i in at.info) + " ".join(m.value for m in at.markdown)
    assert "256 KiB" in text and "64 KiB" in text and "16 layers" in text
    at.selectbox(key="calc_preset").set_value("deepseek-v3").run()
    assert metrics(at)["Attention"] == "MLA"
    assert r"\text{kv\_lora\_rank}" in at.latex[0].value


def test_pasted_config(at):
    at.radio(key="calc_mode").set_value("config").run()
    assert any("Upload or paste" in i.value for i in at.info)
    at.text_area(key="calc_config_text").input((CONFIG_DIR / "gemma-3-12b-it.json").read_text()).run()
    assert not at.exception and not at.error
    assert metrics(at)["KV per token"] == "384 KiB"
    assert any("gemma3" in c.value for c in at.caption)
    assert any("40 of 48 layers use a sliding window of 1,024 tokens" in i.value for i in at.info)


def test_bad_pasted_configs_show_errors_not_tracebacks(at):
    at.radio(key="calc_mode").set_value("config").run()
    cases = [
        ('{"model_type": "llama", "num_hidden_layers": 32', "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"model_type": "llama", "num_hidden_layers": 0, "num_attention_heads": 8, "hidden_size": 64}),
         "must be positive"),
        (json.dumps({"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 8, "hidden_size": 64}), "cannot exceed"),
        ('{"pad": "' + "x" * MAX_CONFIG_BYTES + '"}', "limit is 1 MiB"),
    ]
    for text, fragment in cases:
        at.text_area(key="calc_config_text").input(text).run()
        assert not at.exception
        errors = [e.value for e in at.error]
        assert errors and fragment in errors[0], (fragment, errors)
        assert not at.metric  # nothing computed from a bad config


def test_uploaded_config_wins_over_pasted_text(at):
    at.radio(key="calc_mode").set_value("config").run()
    at.text_area(key="calc_config_text").input((CONFIG_DIR / "gpt2.json").read_text()).run()
    at.file_uploader[0].upload("config.json", (CONFIG_DIR / "falcon-7b.json").read_bytes(), "application/json").run()
    assert not at.exception
    assert metrics(at)["KV per token"] == "8 KiB" and metrics(at)["Attention"] == "MQA"
    at.file_uploader[0].upload("weights.json", b"\x00\x01binary", "application/json").run()
    assert any("binary" in e.value for e in at.error)


def test_example_config_loader_fills_the_text_area(at):
    at.radio(key="calc_mode").set_value("config").run()
    at.selectbox(key="calc_example").set_value("deepseek-v2-lite.json").run()
    assert "deepseek_v2" in at.text_area(key="calc_config_text").value
    assert metrics(at)["Attention"] == "MLA"


def test_typed_numbers_and_their_errors(at):
    at.radio(key="calc_mode").set_value("typed").run()
    assert metrics(at)["KV per token"] == "128 KiB" and metrics(at)["Attention"] == "GQA"
    at.number_input(key="calc_kv_heads").set_value(64).run()
    assert not at.exception
    assert any("cannot exceed" in e.value for e in at.error)
    at.number_input(key="calc_kv_heads").set_value(7).run()
    assert any("not a multiple" in w.value for w in at.warning)
    at.number_input(key="calc_kv_heads").set_value(8).run()
    at.checkbox(key="calc_sliding").check().run()
    at.number_input(key="calc_window").set_value(512).run()
    assert metrics(at)["One request (1,000 tokens)"] == "64 MiB"  # 512 tokens kept x 128 KiB
    assert any("instead of the 125 MiB" in i.value for i in at.info)
    assert r"\min(" in at.latex[1].value


def test_capacity_section(at):
    m = metrics(at)
    # 10,240 blocks of 8 MiB in 80 GiB, less the null block: 10,239 x 16 token slots
    assert m["Max tokens"] == "163,824" and m["Max requests"] == "162" and m["Longest request"] == "163,824"
    assert m["Blocks / request"] == "63"
    assert m["Bytes / block"] == "8 MiB"
    text = " ".join(md.value for md in at.markdown)
    assert "20.4-38.2%" in text and "25.0%" in text


@pytest.mark.model
def test_real_model_bytes_match_the_formula(at):
    at.text_input(key="calc_model_text").input("A prompt cache keeps keys and values.")
    at.button[0].click().run(timeout=600)
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("Exact match" in s.value for s in at.success)


@pytest.mark.parametrize("layers", [0, -5, 10**12])
def test_an_out_of_range_typed_number_is_refused_not_replaced_by_the_old_one(at, layers):
    """Issue 27 item 8: the field's value reaches the page, which refuses it in words and computes nothing
    (before, the widget kept the out-of-range number while the results still used 32 layers)."""
    at.radio(key="calc_mode").set_value("typed").run()
    at.number_input(key="calc_layers").set_value(layers).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("Layers" in e and f"{layers:,}" in e for e in errors), errors
    assert "KV per token" not in metrics(at) and not at.latex
    at.number_input(key="calc_layers").set_value(48).run()
    assert not at.error
    assert metrics(at)["KV per token"] == "192 KiB"  # 48 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes
