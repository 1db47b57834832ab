"""AppTest of app.py and the landing page: renders with the real model card, handles bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz_app.shell.i18n import texts

C = texts("common")
T = texts("home")


ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.model


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_app_renders_the_model_card():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240).run()
    assert not at.exception
    assert not at.error
    metrics = _metrics(at)
    assert metrics[C.MODEL_FIELDS["layers"]] == "30"
    assert metrics[C.MODEL_FIELDS["heads"]] == "9"
    assert metrics[C.MODEL_FIELDS["kv_heads"]] == "3 (GQA)"
    assert metrics[C.MODEL_FIELDS["head_dim"]] == "64"
    assert metrics[C.MODEL_KV_MEASURED] in {"45 KiB", "22.5 KiB"}  # fp32 on CPU, bf16 on CUDA
    sidebar = "\n".join(m.value for m in at.sidebar.markdown)
    assert "SmolLM2-135M-Instruct" in sidebar and "KV per token (measured)" in sidebar


def test_home_page_alone_runs_a_prefill_and_rejects_empty_text():
    at = AppTest.from_file(str(ROOT / "pages" / "home.py"), default_timeout=240).run()
    assert not at.exception
    at.button[0].click().run()
    metrics = _metrics(at)
    tokens = int(metrics[T.TRY_TOKENS].replace(",", ""))
    assert tokens > 10 and metrics[T.TRY_TIME].endswith("ms")
    at.text_area[0].input(" \n ")
    at.button[0].click().run()
    assert not at.exception
    assert [e.value for e in at.error] == [C.ERROR_EMPTY_TEXT]
    at.text_area[0].input("Привет 😀 שלום 你好 \x00")
    at.button[0].click().run()
    assert not at.exception and not at.error
    assert T.TRY_TOKENS in _metrics(at)


SIDEBAR_ONLY = """
from kvviz_app.shell import ui
ui.render_model_sidebar()
"""


def test_unknown_custom_model_shows_an_error_and_keeps_the_model():
    # The sidebar alone (AppTest drops sidebar elements of st.navigation apps on reruns).
    at = AppTest.from_string(SIDEBAR_ONLY, default_timeout=240).run()
    assert not at.exception and not at.error
    at.sidebar.radio[0].set_value("custom").run()
    at.sidebar.text_input[0].input("kvviz-tests/no-such-model")
    at.sidebar.button[0].click().run()
    assert not at.exception
    errors = [e.value for e in at.sidebar.error]
    assert len(errors) == 1 and "kvviz-tests/no-such-model" in errors[0] and "hf download" in errors[0]
    card = "\n".join(m.value for m in at.sidebar.markdown)
    assert "SmolLM2-135M-Instruct" in card and "30 layers" in card  # still the embedded model
    assert C.MODEL_FALLBACK.format(name="SmolLM2-135M-Instruct") in [c.value for c in at.sidebar.caption]
    at.sidebar.radio[0].set_value("embedded").run()
    assert not at.exception and not at.sidebar.error
