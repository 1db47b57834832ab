"""AppTests of the Live engine page's fleet view: three test publishers watched at once, their health
table, each scorer's pick for a prompt given as token ids, bad replica lists as one clear message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from apptest_util import until
from live_testpub import WirePublisher, free_port
from streamlit.testing.v1 import AppTest

from kvviz.fleet.fleet import stop_shared_fleet
from kvviz.mirror.hashing import hash_block_chain, init_none_hash
from kvviz_app.shell.i18n import texts

T = texts("fleet")
L = texts("live")

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "live.py")


def _fleet_mode(app: AppTest) -> AppTest:
    app.radio(key="lv_mode").set_value("fleet").run()
    return app


def _button(app: AppTest, label: str):
    return next(b for b in app.button if b.label == label)


def test_three_replicas_health_and_routing() -> None:
    ports = {n: free_port(2) for n in "abc"}
    pubs = {n: WirePublisher(p, p + 1, rank=0) for n, p in ports.items()}
    tokens = list(range(900, 964))
    d = hash_block_chain(tokens, 16, "sha256", init_none_hash("sha256", None))
    pubs["a"].publish([pubs["a"].s["BlockStored"](d[:1], None, tokens[:16], 16, None, "GPU", None)])
    pubs["b"].publish([pubs["b"].s["BlockStored"](d[:3], None, tokens[:48], 16, None, "GPU", None)])
    pubs["c"].publish([pubs["c"].s["BlockStored"](d[:2], None, tokens[:32], 16, None, "GPU", None)])
    text = "\n".join(f"{n}=tcp://127.0.0.1:{p} tcp://127.0.0.1:{p + 1}" for n, p in ports.items())
    app = _fleet_mode(AppTest.from_file(PAGE, default_timeout=60).run())
    specs = None
    try:
        app.text_area(key="lf_specs").set_value(text).run()
        _button(app, T.FLEET_CONNECT).click().run()
        specs = app.session_state["lf_fleet"]
        cols = T.HEALTH_COLS
        until(app, lambda a: a.table and list(a.table[0].value[cols["blocks"]]) == [1, 3, 2])
        health = app.table[0].value
        assert list(health[cols["name"]]) == ["a", "b", "c"] and list(health[cols["errors"]]) == [0, 0, 0]
        assert set(health[cols["status"]]) <= set(L.STATUS_WORD.values())  # words, not the subscriber's codes
        assert cols["pod"] not in health.columns  # no replica names a pod: no column of dashes
        assert len(app.table) == 1  # every block on the device: no blocks-by-medium table
        app.text_area(key="lf_prompt").set_value(",".join(map(str, tokens)))
        app.radio(key="lf_tok").set_value("ids")
        app.number_input(key="lf_load_b").set_value(50)
        app.run()
        _button(app, T.ROUTE_CHECK).click().run()
        assert not app.exception and not app.error
        picks = {m.label: m.value for m in app.metric}
        # llm-d: b holds 3 leading blocks. Dynamo: b = 1 + (50 + 4) = 55, c = 2 + 4 = 6, a = 3 + 4 = 7 -> c.
        assert picks == {T.PICKS["longest_prefix"]: "b", T.PICKS["overlap_cost"]: "c", T.PICKS["round_robin"]: "a"}
        scores = app.table[1].value  # the score table: words whole, no sideways scroll at 1024 px
        assert list(scores.iloc[:, 0]) == ["a", "b", "c"] and list(scores.iloc[:, 1]) == [1, 3, 2]
        _button(app, T.ROUTE_CHECK).click().run()  # the next prompt: round-robin moves on
        assert {m.label: m.value for m in app.metric}[T.PICKS["round_robin"]] == "b"
        assert len(app.get("plotly_chart")) >= 2  # the prefix columns and the heat strip
    finally:
        if specs is not None:
            stop_shared_fleet(specs)
        for p in pubs.values():
            p.close()


def test_blocks_by_medium_columns_with_a_host_tier() -> None:
    """A replica with a host-memory tier (events with medium "CPU") adds a table of blocks by medium."""
    ports = {n: free_port(2) for n in "ab"}
    pubs = {n: WirePublisher(p, p + 1, rank=0) for n, p in ports.items()}  # replay: published before watching
    tokens = list(range(700, 748))
    d = hash_block_chain(tokens, 16, "sha256", init_none_hash("sha256", None))
    pubs["a"].publish([pubs["a"].s["BlockStored"](d[:3], None, tokens, 16, None, "GPU", None)])
    pubs["b"].publish([pubs["b"].s["BlockStored"](d[:3], None, tokens, 16, None, "CPU", None),
                       pubs["b"].s["BlockStored"](d[:1], None, tokens[:16], 16, None, "GPU", None)])
    text = "\n".join(f"{n}=tcp://127.0.0.1:{p} tcp://127.0.0.1:{p + 1}" for n, p in ports.items())
    app = _fleet_mode(AppTest.from_file(PAGE, default_timeout=60).run())
    specs = None
    try:
        app.text_area(key="lf_specs").set_value(text).run()
        _button(app, T.FLEET_CONNECT).click().run()
        specs = app.session_state["lf_fleet"]
        gpu, cpu = T.MEDIUM_COLS["GPU"], T.MEDIUM_COLS["CPU"]
        until(app, lambda a: len(a.table) > 1 and list(a.table[1].value[cpu]) == [0, 3])
        media = app.table[1].value
        assert list(media[T.HEALTH_COLS["name"]]) == ["a", "b"] and list(media[gpu]) == [3, 1]
        assert list(media[T.HEALTH_COLS["blocks"]]) == [3, 3]  # distinct hashes, any medium
        assert any(T.MEDIA_NOTE in c.value for c in app.caption)
        spec = json.loads(app.get("plotly_chart")[0].proto.spec)  # the prefix columns: names over their media
        assert spec["layout"]["xaxis"]["ticktext"] == ["a<br>GPU 3 · CPU 0", "b<br>GPU 1 · CPU 3"]
        assert not app.exception and not app.error
    finally:
        if specs is not None:
            stop_shared_fleet(specs)
        for p in pubs.values():
            p.close()


@pytest.mark.parametrize("text", ["a=tcp://127.0.0.1:1\na=tcp://127.0.0.1:2", "garbage", "a=tcp://*:1",
                                  "a=tcp://127.0.0.1:1 tcp://127.0.0.1:2 extra", "x" * 5000])
def test_bad_replica_lists_are_one_message(text: str) -> None:
    app = _fleet_mode(AppTest.from_file(PAGE, default_timeout=60).run())
    app.text_area(key="lf_specs").set_value(text).run()
    _button(app, T.FLEET_CONNECT).click().run()
    assert not app.exception
    assert [e.value.split(":")[0] for e in app.error] == [T.FLEET_BAD.split(":")[0]]
    assert any(T.FLEET_NOT_CONNECTED in i.value for i in app.info)
    assert app.title[0].value == L.TITLE
