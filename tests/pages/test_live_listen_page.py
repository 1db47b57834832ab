"""AppTests of the Live engine page in listen mode ("My engine connects to kvviz"): the page binds, a
publisher built like vLLM 0.33.0's for a specific address connects and is heard, with a replay of what it
published before; a bad or busy listen address is a clear message; the demo engine connects too."""

from __future__ import annotations

from pathlib import Path

import pytest
from apptest_util import until
from live_testpub import WirePublisher, free_port
from streamlit.testing.v1 import AppTest

from kvviz.fleet import demo as D
from kvviz.fleet.subscriber import LiveConfig, Subscriber, stop_shared
from kvviz_app.shell.i18n import texts

T = texts("live")
PAGE = str(Path(__file__).resolve().parents[2] / "pages" / "live.py")


def _button(app: AppTest, label: str):
    return next(b for b in app.button if b.label == label)


def _metrics(app: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in app.metric}


def _listen(app: AppTest, endpoint: str, replay: str = "") -> None:
    app.radio(key="lv_topology").set_value("listen").run()
    assert app.text_input(key="lv_ep").label == T.LISTEN_ENDPOINT
    app.text_input(key="lv_ep").set_value(endpoint)
    app.text_input(key="lv_replay").set_value(replay)
    app.run()
    _button(app, T.LISTEN).click().run()


def test_a_connecting_publisher_is_heard_with_replay() -> None:
    port, replay = free_port(), free_port()
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    assert T.TOPOLOGY_EXPLAIN in [c.value for c in app.caption]
    pub = None
    try:
        _listen(app, f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{replay}")
        assert not app.exception and not app.error
        assert any(c.value == T.STATUS["listening"].format(endpoint=f"tcp://127.0.0.1:{port}") for c in app.caption)
        pub = WirePublisher(port, replay, connect=True)
        pub.publish([pub.stored([1, 2], None, list(range(8)))], send=False)  # before the page subscribed
        pub.wait_subscribed()
        pub.wait_replay_served()  # the replay asked on connecting answered first: the next batch is live
        pub.publish([pub.stored([3], 2, list(range(8, 12)))])
        until(app, lambda a: _metrics(a).get(T.M_BATCHES) == "2", describe=_metrics)
        m = _metrics(app)
        assert m[T.M_REPLAYED] == "1" and m[T.M_BLOCKS] == "3" and m[T.M_MISSED] == "0 / 0"
    finally:
        stop_shared(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{replay}", listen=True))
        if pub is not None:
            pub.close()


@pytest.mark.parametrize("endpoint", ["tcp://127.0.0.1", "udp://127.0.0.1:5800", "tcp://127.0.0.1:0"])
def test_a_bad_listen_address_is_a_clear_message(endpoint: str) -> None:
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    _listen(app, endpoint)
    assert not app.exception
    assert any(e.value.startswith(T.BAD_LISTEN.split("{")[0]) for e in app.error)
    assert any(T.NOT_CONNECTED in i.value for i in app.info)


def test_a_busy_listen_port_is_a_clear_message() -> None:
    port = free_port()
    holder = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", listen=True))  # something bound there already
    try:
        app = AppTest.from_file(PAGE, default_timeout=60).run()
        _listen(app, f"tcp://127.0.0.1:{port}")
        assert not app.exception
        assert any("cannot listen on" in e.value and e.value.startswith(T.BAD_LISTEN.split(":")[0])
                   for e in app.error)
    finally:
        holder.stop()


def test_the_demo_engine_connects_in_listen_mode() -> None:
    port, replay = free_port(), free_port()
    app = AppTest.from_file(PAGE, default_timeout=60).run()
    try:
        _listen(app, f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{replay}")
        _button(app, T.DEMO_START).click().run()
        assert not app.exception and not app.error
        until(app, lambda a: int(_metrics(a).get(T.M_BATCHES, "0").replace(",", "")) >= 3, describe=_metrics)
    finally:
        demo = D.running_demo(f"tcp://127.0.0.1:{port}")
        if demo is not None:
            demo.stop()
        stop_shared(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{replay}", listen=True))
