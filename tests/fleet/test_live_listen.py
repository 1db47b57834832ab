"""Listen mode: kvviz binds its SUB socket and the engine's PUB connects to it, as vLLM 0.33.0's
``ZmqEventPublisher`` does when its endpoint names a specific address (``tcp://127.0.0.1:5800``); the
engine's replay ROUTER still binds and kvviz asks it for what it missed. Loopback only."""

from __future__ import annotations

import time

import pytest
from live_testpub import WirePublisher, free_port

from kvviz.fleet.subscriber import LiveConfig, Subscriber, check_listen_endpoint

WAIT_S = 30


def _until(cond, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_publisher_that_connects_is_heard_and_replays_what_was_missed() -> None:
    port, replay = free_port(), free_port()
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{replay}", listen=True)).start()
    pub = None
    try:
        assert sub.status() == "listening"
        pub = WirePublisher(port, replay, connect=True)
        # two batches the engine published before kvviz's subscription reached it: only in its replay buffer
        pub.publish([pub.stored([1, 2], None, list(range(8)))], send=False)
        pub.publish([pub.stored([3], 2, list(range(8, 12)))], send=False)
        pub.wait_subscribed()
        pub.wait_replay_served()  # the replay asked on connecting answered first: the next batch is live
        pub.publish([pub.stored([4], 3, list(range(12, 16)))])
        _until(lambda: sub.summary()["batches"] == 3, f"three batches, got {sub.summary()}")
        s = sub.summary()
        assert (s["replayed"], s["missed"], s["cached_blocks"], s["last_seq"]) == (2, 0, 4, 2)
        assert s["replay_requests"] >= 1 and s["replays_ended"] >= 1
        assert sub.status() == "receiving" and sub.counters.ranks[0].peers == 1
    finally:
        sub.stop()
        if pub is not None:
            pub.close()


def test_two_ranks_connect_to_port_and_port_plus_one() -> None:
    port = free_port(2)
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", dp_size=2, listen=True)).start()
    pubs = [WirePublisher(port + r, rank=r, connect=True) for r in range(2)]
    try:
        for r, pub in enumerate(pubs):
            pub.wait_subscribed()
            pub.publish([pub.stored([10 + r], None, list(range(4)))])
        _until(lambda: sub.summary()["batches"] == 2, "one batch per rank")
        assert sub.summary()["dp_ranks"] == [0, 1]
    finally:
        sub.stop()
        for pub in pubs:
            pub.close()


def test_a_busy_port_or_a_bad_address_is_one_line() -> None:
    port = free_port()
    first = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", listen=True))
    try:
        with pytest.raises(ValueError, match=f"cannot listen on tcp://127.0.0.1:{port}"):
            Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", listen=True))
    finally:
        first.stop()
    for bad in ("127.0.0.1:5800", "tcp://127.0.0.1", "tcp://127.0.0.1:0", "ipc:///tmp/x", ""):
        with pytest.raises(ValueError) as info:
            LiveConfig(bad, listen=True).validated()
        assert "\n" not in str(info.value)
    assert check_listen_endpoint(" tcp://*:5800 ") == "tcp://*:5800"
    assert check_listen_endpoint("tcp://[::1]:5800") == "tcp://[::1]:5800"


def test_an_engine_that_restarts_connects_again_and_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvviz.fleet import subscriber

    monkeypatch.setattr(subscriber, "RECEIVING_S", 0.5)
    port = free_port()
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", listen=True)).start()
    pub = WirePublisher(port, connect=True)
    try:
        pub.wait_subscribed()
        pub.publish([pub.stored([1, 2], None, list(range(8)))])
        pub.publish([pub.stored([3], 2, list(range(4)))])
        _until(lambda: sub.summary()["batches"] == 2, "first engine's batches")
        pub.close()  # the engine goes away: the listening socket stays, the peer is gone
        _until(lambda: sub.status() == "listening" and sub.counters.ranks[0].peers == 0, "disconnect noticed")
        pub = WirePublisher(port, connect=True)  # ... and connects again with an empty cache, seq from 0
        pub.wait_subscribed()
        pub.publish([pub.stored([7], None, list(range(4)))])
        _until(lambda: sub.counters.restarts == 1 and sub.summary()["cached_blocks"] == 1, "restart applied")
        assert sub.counters.reconnects >= 1 and sub.summary()["last_seq"] == 0 and sub.counters.ranks[0].peers == 1
    finally:
        sub.stop()
        pub.close()
