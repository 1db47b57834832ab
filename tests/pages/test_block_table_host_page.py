"""AppTest of the block-table page with the host tier on: the "Host tier" choice adds host memory and its
LRU order under the device pool, counters and a table of prompt tokens by source, host events in the step's
lines; off (the default) the page shows none of it. In English and in Russian, and as a share link."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from kvviz.analysis.scenarios.load import load_builtin
from kvviz.analysis.scenarios.play import play_scenario
from kvviz.mirror.events import EventKind
from kvviz_app.shell.i18n import texts, use_lang

ROOT = Path(__file__).resolve().parents[2]
PAGE = str(ROOT / "pages" / "block_table.py")
T = texts("block_table")


def _load_step(host: int) -> int:
    """The first step of pool_pressure where a prompt loads blocks from a host tier of ``host`` blocks."""
    run = play_scenario(load_builtin("pool_pressure").with_host_tier(host))
    return next(k for k in range(1, run.num_steps + 1)
                if any(e.kind is EventKind.HOST_LOAD for e in run.events_of_step(k)))


def _page(host: int, step: int, lang: str = "en") -> AppTest:
    app = AppTest.from_file(PAGE, default_timeout=120)
    app.session_state["bt_name"] = "pool_pressure"
    app.session_state["bt_host"] = host
    app.session_state["bt_step"] = step
    with use_lang(lang):
        if lang != "en":
            app.query_params["lang"] = lang
        app.run()
    assert not app.exception, app.exception
    return app


def test_host_tier_on_shows_both_pools_hits_by_source_and_host_events():
    step = _load_step(16)
    app = _page(16, step)
    metrics = {m.label: m.value for m in app.metric}
    host_label = T.COUNTERS_HOST["host_hit_tokens"][0]
    assert int(metrics[host_label]) > 0
    charts = app.get("plotly_chart")
    assert len(charts) >= 6  # pool, free queue, host pool, host LRU, block tables, timeline
    text = "\n".join(m.value for m in app.markdown)
    assert T.EVENT_KIND_LABEL["host_load"] in text and T.EVENT_KIND_LABEL["host_store"] in text
    table = app.dataframe[0].value
    cols = T.HITS_COLUMNS
    assert list(table.columns) == list(cols.values())
    loaded = table[table[cols["host"]] > 0]
    assert len(loaded) == 1 and int(metrics[host_label]) == int(loaded[cols["host"]].iloc[0])
    row = loaded.iloc[0]
    assert row[cols["device"]] + row[cols["host"]] + row[cols["computed"]] == row[cols["prompt"]]


def test_host_tier_off_by_default_shows_none_of_it():
    app = AppTest.from_file(PAGE, default_timeout=120)
    app.session_state["bt_name"] = "pool_pressure"
    app.session_state["bt_step"] = _load_step(16)
    app.run()
    assert not app.exception
    assert app.selectbox(key="bt_host").value == 0
    labels = {m.label for m in app.metric}
    assert not labels & {label for label, _ in T.COUNTERS_HOST.values()}
    assert T.HITS_HEADER not in "\n".join(m.value for m in app.markdown)


def test_host_tier_in_russian():
    R = texts("block_table", "ru")
    app = _page(16, _load_step(16), "ru")
    labels = {m.label for m in app.metric}
    assert R.COUNTERS_HOST["host_hit_tokens"][0] in labels
    assert R.COUNTERS_HOST["host_hit_tokens"][0] != T.COUNTERS_HOST["host_hit_tokens"][0]  # translated
    assert app.selectbox(key="bt_host").label == R.HOST_TIER
