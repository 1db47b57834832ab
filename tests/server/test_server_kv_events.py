"""The server's KV-event publisher (vLLM 0.33.0's PUB + replay ROUTER layout) read by kvviz's own
subscriber: batches published before the subscriber connected come back through the replay socket."""

from __future__ import annotations

import time

from live_testpub import free_port

from kvviz.fleet.subscriber import LiveConfig, Subscriber
from kvviz.mirror.kv_events import BlockStored, KVEventBatch
from kvviz.server.kv_publisher import KVEventPublisher


def _batch(i: int) -> KVEventBatch:
    return KVEventBatch(time.time(), [BlockStored([bytes([i]) * 32], None, list(range(i * 4, i * 4 + 4)), 4,
                                                  None, None, None)])


def test_the_live_stream_decodes_with_kvviz_subscriber():
    port = free_port(1)
    pub = KVEventPublisher(f"tcp://127.0.0.1:{port}").start()
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}")).start()
    try:
        deadline = time.monotonic() + 10
        i = 0
        while sub.summary()["batches"] < 3 and time.monotonic() < deadline:  # until the subscription is through
            pub.publish(_batch(i % 200))
            i += 1
            sub.wait(0.05)
        s = sub.summary()
        assert s["batches"] >= 3 and s["decode_errors"] == 0 and s["missed"] == 0
        assert s["events"]["BlockStored"] == s["batches"] and s["cached_blocks"] >= 3
    finally:
        sub.stop()
        pub.stop()


def test_replay_fills_the_gap_before_the_subscriber_connected():
    port = free_port(2)
    pub = KVEventPublisher(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}").start()
    try:
        for i in range(5):  # published while nobody listens: lost on PUB, kept for replay
            pub.publish(_batch(i))
        deadline = time.monotonic() + 5
        while pub.seq < 5 and time.monotonic() < deadline:
            pub._sleep(0.01)
        assert pub.seq == 5
        sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}"), max_batches=8).start()
        try:
            deadline = time.monotonic() + 5
            while sub.summary()["batches"] < 5 and time.monotonic() < deadline:
                sub.wait(0.02)
            for i in range(5, 8):
                pub.publish(_batch(i))
            assert sub.wait(5.0), sub.summary()
            summary = sub.summary()
            assert summary["replayed"] == 5 and summary["missed"] == 0 and summary["decode_errors"] == 0
            assert summary["first_seq"] == 0 and summary["last_seq"] == 7 and summary["cached_blocks"] == 8
        finally:
            sub.stop()
    finally:
        pub.stop()


def test_engine_event_batches_and_plain_lists_are_published():
    port = free_port(1)
    pub = KVEventPublisher(f"tcp://127.0.0.1:{port}")
    try:
        pub.publish([])  # nothing to send
        pub.publish(KVEventBatch(1.0, []))
        assert pub._queue.qsize() == 0
        pub.publish(_batch(1))
        pub.publish(list(_batch(2).events))
        assert pub._queue.qsize() == 2
    finally:
        pub.stop()


def test_a_busy_port_is_one_line():
    port = free_port(1)
    first = KVEventPublisher(f"tcp://127.0.0.1:{port}")
    try:
        try:
            KVEventPublisher(f"tcp://127.0.0.1:{port}")
        except ValueError as exc:
            assert "cannot bind" in str(exc) and "\n" not in str(exc)
        else:
            raise AssertionError("a second bind on the same port succeeded")
    finally:
        first.stop()
