"""The subscriber thread on its own: an engine restart (sequence numbers start over) after a lost
connection, the block cap's overflow count, one shared subscriber per configuration, endpoint checks."""

from __future__ import annotations

import time

import pytest
from live_testpub import WirePublisher, free_port

from kvviz.fleet import subscriber
from kvviz.fleet.subscriber import LiveConfig, Subscriber, check_endpoint, read_view, shared, stop_shared

WAIT_S = 30


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_engine_restart_reconnects_and_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subscriber, "RECEIVING_S", 0.5)  # "receiving" lapses sooner after the engine goes
    port = free_port(2)
    pub = WirePublisher(port, port + 1, rank=0)
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}")).start()
    try:
        pub.wait_subscribed()
        pub.wait_replay_served()
        pub.publish([pub.stored([1, 2], None, list(range(8)))])
        pub.publish([pub.stored([3], 2, list(range(4)))])
        _until(lambda: sub.summary()["batches"] == 2, "first engine's batches")
        pub.close()  # the engine goes away ...
        _until(lambda: sub.status() in ("connecting", "connected") and not sub.counters.ranks[0].connected,
               "disconnect noticed")
        pub = WirePublisher(port, port + 1, rank=0)  # ... and comes back with an empty cache, seq from 0
        pub.wait_subscribed()
        pub.publish([pub.stored([7], None, list(range(4)))])
        _until(lambda: sub.counters.restarts == 1 and sub.summary()["cached_blocks"] == 1, "restart applied")
        view = read_view(sub)
        assert view.reconnects >= 1 and view.summary["last_seq"] == 0 and view.summary["missed"] == 0
    finally:
        sub.stop()
        pub.close()
    assert not sub.alive


def test_block_cap_overflow_is_counted() -> None:
    port = free_port()
    pub = WirePublisher(port)
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}"), max_blocks=5).start()
    try:
        pub.wait_subscribed()
        pub.publish([pub.stored(list(range(1, 9)), None, list(range(32)))])
        _until(lambda: sub.summary()["batches"] == 1, "batch")
        view = read_view(sub)
        assert view.summary["cached_blocks"] == 5 and view.overflow == 3
    finally:
        sub.stop()
        pub.close()


def test_one_shared_subscriber_per_configuration() -> None:
    port = free_port()
    cfg = LiveConfig(f"tcp://127.0.0.1:{port}")
    try:
        first = shared(cfg)
        assert shared(LiveConfig(f" tcp://127.0.0.1:{port} ")) is first and first.alive
        assert shared(LiveConfig(f"tcp://127.0.0.1:{port}", topic="x")) is not first
    finally:
        stop_shared(cfg)
        stop_shared(LiveConfig(f"tcp://127.0.0.1:{port}", topic="x"))
    assert not first.alive


@pytest.mark.parametrize("endpoint", ["tcp://*:1", "tcp://h:0", "tcp://h:70000", "ipc:///tmp/x", "tcp://h", "", "h:1"])
def test_bad_endpoints(endpoint: str) -> None:
    with pytest.raises(ValueError):
        check_endpoint(endpoint)
    assert check_endpoint("tcp://engine-1.local:5557") == "tcp://engine-1.local:5557"
    with pytest.raises(ValueError):
        LiveConfig("tcp://h:65535", dp_size=2).validated()  # rank 1 would need port 65536
