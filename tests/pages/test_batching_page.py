"""AppTest of the Continuous batching page: the burst runs on the model and its passes show up."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz_app.i18n import texts

T = texts("batching")


pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]


def test_burst_fills_the_timeline():
    at = AppTest.from_file(str(ROOT / "kvviz_app" / "page_scripts" / "batching.py"), default_timeout=600).run()
    assert not at.exception, at.exception
    at.button(key="batching_burst").click().run()
    assert not at.exception, at.exception
    assert at.success and "requests in" in at.success[0].value
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics[T.M_PASSES]) >= 1 and metrics[T.M_PASS_MS].endswith("ms")
    assert any(T.TABLE_COLUMNS["computed"] in df.value.columns for df in at.dataframe)
