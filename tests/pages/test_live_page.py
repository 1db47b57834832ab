"""AppTests of the Live engine page: the connect form, bad endpoints, a test publisher's events shown as
numbers and trees, "is my prompt cached?" against them, and the demo engine started from the page."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_util import until
from live_testpub import WirePublisher, free_port
from streamlit.testing.v1 import AppTest

from kvviz.fleet import demo as D
from kvviz.fleet.subscriber import LiveConfig, stop_shared
from kvviz.mirror.hashing import hash_block_chain, init_none_hash
from kvviz_app.shell.i18n import texts

C = texts("common")
T = texts("live")

PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "live.py")


def _button(app: AppTest, label: str):
    return next(b for b in app.button if b.label == label)


def _metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def _connect(app: AppTest, port: int, replay: int | None) -> None:
    app.text_input(key="lv_ep").set_value(f"tcp://127.0.0.1:{port}")
    app.text_input(key="lv_replay").set_value(f"tcp://127.0.0.1:{replay}" if replay else "")
    app.run()
    _button(app, T.CONNECT).click().run()


def test_not_connected_offers_the_demo() -> None:
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    assert not app.exception
    assert any(T.NOT_CONNECTED in i.value for i in app.info)
    assert _button(app, T.DEMO_START)


@pytest.mark.parametrize("endpoint", ["tcp://*:5557", "http://127.0.0.1:5557", "tcp://127.0.0.1:0", "x" * 5000])
def test_bad_endpoint_is_a_clear_message(endpoint: str) -> None:
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    app.text_input(key="lv_ep").set_value(endpoint).run()
    _button(app, T.CONNECT).click().run()
    assert not app.exception
    assert any(e.value.startswith(T.BAD_CONFIG.split("{")[0]) for e in app.error)
    assert any(T.NOT_CONNECTED in i.value for i in app.info)


def test_events_from_a_publisher_and_a_prompt_check() -> None:
    port = free_port(2)
    pub = WirePublisher(port, port + 1, rank=0)
    tokens = list(range(500, 548))  # 3 blocks of 16
    digests = hash_block_chain(tokens, 16, "sha256", init_none_hash("sha256", "5"))
    S = pub.s["BlockStored"]
    pub.publish([S(digests[:2], None, tokens[:32], 16, None, "GPU", None)])
    pub.publish([S([b"z" * 32], None, list(range(16)), 16, None, "CPU", None)])
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    try:
        _connect(app, port, port + 1)
        until(app, lambda a: _metrics(a).get(T.M_BATCHES) == "2", describe=_metrics)
        m = _metrics(app)
        assert m[T.M_BLOCKS] == "3" and m[T.M_TOKENS] == "48" and m[T.M_MEDIA] == "2 / 1"
        assert m[T.M_REPLAYED] == "2" and m[T.M_MISSED] == "0 / 0"
        trees = app.table[0].value
        assert list(trees[T.COL_BLOCKS]) == [2, 1] and list(trees[T.COL_TOKENS]) == [32, 16]
        app.text_area(key="lv_prompt").set_value(",".join(map(str, tokens)))
        app.radio(key="lv_tok").set_value(T.TOKENIZER_IDS)
        app.text_input(key="lv_seed").set_value("5")
        app.run()
        _button(app, T.CHECK).click().run()
        assert not app.exception and not app.error
        shown = " ".join(md.value for md in app.markdown)
        assert T.PROMPT_RESULT.format(cached=2, blocks=3, run=2, tokens=32, total=48) in shown
        app.text_input(key="lv_seed").set_value("6").run()  # another seed: another NONE_HASH, nothing cached
        _button(app, T.CHECK).click().run()
        assert T.PROMPT_RESULT.format(cached=0, blocks=3, run=0, tokens=0, total=48) in " ".join(
            md.value for md in app.markdown)
        app.text_area(key="lv_prompt").set_value("1,2,x").run()
        _button(app, T.CHECK).click().run()
        assert not app.exception and app.error
    finally:
        stop_shared(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"))
        pub.close()


def test_vllm_033_fields_shown_and_a_salted_prompt_matches() -> None:
    port = free_port(2)
    pub = WirePublisher(port, port + 1, rank=0)  # vLLM 0.33.0's form and replay layout
    tokens = list(range(700, 732))  # 2 blocks of 16
    salted = hash_block_chain(tokens, 16, "sha256", init_none_hash("sha256", None), "tenant-a")
    S = pub.s["BlockStored"]
    pub.publish([S(salted, None, tokens, 16, None, "CPU", None, extra_keys=[("tenant-a",), None], group_idx=0,
                   kv_cache_spec_kind="full_attention", locality="REMOTE", ownership="tier-2", session_id="chat-9")])
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    try:
        _connect(app, port, port + 1)
        until(app, lambda a: _metrics(a).get(T.M_BATCHES) == "1", describe=_metrics)
        trees, stores = app.table[0].value, app.table[1].value
        assert list(trees[T.COL_WHERE]) == ["CPU/REMOTE"] and list(trees[T.COL_SESSION]) == ["chat-9"]
        row = stores.iloc[0]
        assert (row[T.COL_PLACE], row[T.COL_SESSION]) == ("CPU · REMOTE · tier-2", "chat-9")
        assert row[T.COL_EXTRA] == "tenant-a" and row[T.COL_GROUP] == "0: full_attention"
        assert any(C.HASHES_AS.format(release="vLLM 0.33.0") == c.value for c in app.caption)
        app.text_area(key="lv_prompt").set_value(",".join(map(str, tokens)))
        app.radio(key="lv_tok").set_value(T.TOKENIZER_IDS)
        app.run()
        _button(app, T.CHECK).click().run()  # no salt: vLLM's hashes differ, nothing reused
        assert T.PROMPT_RESULT.format(cached=0, blocks=2, run=0, tokens=0, total=32) in " ".join(
            md.value for md in app.markdown)
        app.text_input(key="lv_salt").set_value("tenant-a").run()
        _button(app, T.CHECK).click().run()
        assert T.PROMPT_RESULT.format(cached=2, blocks=2, run=2, tokens=32, total=32) in " ".join(
            md.value for md in app.markdown)
        app.text_input(key="lv_lora").set_value("sql").run()  # a LoRA name without its path
        _button(app, T.CHECK).click().run()
        assert [e.value for e in app.error] == [T.LORA_BOTH] and not app.exception
    finally:
        stop_shared(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"))
        pub.close()


def test_nobody_publishing_says_so() -> None:
    port = free_port(2)
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    try:
        app.text_input(key="lv_metrics").set_value(f"http://127.0.0.1:{free_port()}/metrics")
        _connect(app, port, port + 1)
        assert not app.exception
        assert _metrics(app)[T.M_BATCHES] == "0"
        assert any(T.NO_EVENTS_YET in i.value for i in app.info)
        assert any(w.value.startswith(T.METRICS_ERROR.split("{")[0]) for w in app.warning)
    finally:
        stop_shared(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"))


@pytest.mark.model
def test_demo_engine_started_from_the_page() -> None:
    port = free_port(2)
    ep = f"tcp://127.0.0.1:{port}"
    app = AppTest.from_file(PAGE, default_timeout=180).run()
    try:
        app.text_input(key="lv_ep").set_value(ep)
        app.text_input(key="lv_replay").set_value(f"tcp://127.0.0.1:{port + 1}")
        app.run()
        _button(app, T.DEMO_START).click().run()
        assert not app.exception and D.running_demo(ep) is not None
        until(app, lambda a: int(_metrics(a).get(T.M_BATCHES, "0").replace(",", "")) >= 5, describe=_metrics)
        _button(app, T.USE_DEMO_PROMPT).click().run()
        _button(app, T.CHECK).click().run()
        assert not app.exception and not app.error
        assert any("full blocks are cached now" in md.value for md in app.markdown)
    finally:
        stop_shared(LiveConfig(ep, f"tcp://127.0.0.1:{port + 1}"))
        demo = D.running_demo(ep)
        if demo is not None:
            demo.stop()


def test_a_late_join_without_replay_says_unknown_not_uncached() -> None:
    """Blocks stored before kvviz joined (no replay endpoint) are unknown: never "0 of 3 cached"."""
    port = free_port()
    pub = WirePublisher(port, rank=0)
    tokens = list(range(500, 548))  # 3 blocks of 16
    digests = hash_block_chain(tokens, 16, "sha256", init_none_hash("sha256", "5"))
    S = pub.s["BlockStored"]
    pub.publish([S(digests[:2], None, tokens[:32], 16, None, "GPU", None)])  # before kvviz listens
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    try:
        _connect(app, port, None)

        def heard(a: AppTest) -> bool:
            if _metrics(a).get(T.M_BATCHES) in (None, "0"):
                pub.publish([S([digests[2]], digests[1], tokens[32:], 16, None, "GPU", None)])  # while it listens
                return False
            return True

        until(app, heard, describe=_metrics)
        app.text_area(key="lv_prompt").set_value(",".join(map(str, tokens)))
        app.radio(key="lv_tok").set_value(T.TOKENIZER_IDS)
        app.text_input(key="lv_seed").set_value("5")
        app.run()
        _button(app, T.CHECK).click().run()
        assert not app.exception and not app.error
        shown = " ".join(md.value for md in app.markdown)
        assert T.PROMPT_RESULT_PARTIAL.format(cached=1, blocks=3, unknown=2, run=0, tokens=0, total=48) in shown
    finally:
        stop_shared(LiveConfig(f"tcp://127.0.0.1:{port}"))
        pub.close()
