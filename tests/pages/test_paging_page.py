"""AppTest of the "Paged vs contiguous memory" page: defaults, a changed policy, a bad config."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "paging.py")


def test_paging_page_defaults_and_controls():
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Utilisation"] == "27.5% → 94.6%"  # the chart's "token states" share (one definition)
    assert metrics["Requests at once"] == "4 → 23"
    assert "20.4%-38.2%" in at.info[0].value
    assert len(at.get("plotly_chart")) == 4

    at.radio(key="pg_reservation").set_value("oracle").run()
    assert not at.exception
    assert {m.label: m.value for m in at.metric}["Utilisation"].startswith("48.5%")

    at.slider(key="pg_step").set_value(0).run()
    assert not at.exception and "step 0" in " ".join(m.value for m in at.markdown)

    at.slider(key="pg_output").set_value((1, 2048)).run()  # longer than the maximum sequence length
    assert not at.exception
    assert at.error and "max_model_len" in at.error[0].value
