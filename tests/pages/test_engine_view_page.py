"""AppTest of the Engine (live) page: a burst runs on the real engine; block tables, the step timeline, the
pool grid and a block's real K/V (heatmap and tokens) show up."""

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
