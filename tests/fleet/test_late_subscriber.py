"""A subscriber that joined after the engine had published (no replay) cannot know what was stored before
it joined: a prompt's blocks it has not seen are "unknown", not "not cached"; with a replay from batch 0, or
from the engine's first batch on, or after the engine cleared its cache, its view is whole."""

from __future__ import annotations

import time

from live_testpub import WirePublisher, free_port

from kvviz.fleet.subscriber import LiveConfig, Subscriber, check_prompt

TOKENS = list(range(1, 13))  # three blocks of 4


def _hashes(pub: WirePublisher) -> list[int]:
    """The prompt's block hashes as kvviz hashes them, in the publisher's int form (low 64 bits)."""
    from kvviz.fleet.wire import to_int_hash
    from kvviz.mirror.hashing import hash_block_chain, init_none_hash

    return [to_int_hash(d) for d in hash_block_chain(TOKENS, 4, "sha256", init_none_hash("sha256", None))]


def _store(pub: WirePublisher, hashes: list[int], first: int, last: int) -> list:
    parent = hashes[first - 1] if first else None
    return [pub.s["BlockStored"](hashes[first:last], parent, TOKENS[4 * first:4 * last], 4, None, "GPU", None)]


def _wait_batches(sub: Subscriber, n: int, pub: WirePublisher | None = None, events: list | None = None) -> None:
    deadline = time.monotonic() + 20
    while sub.summary()["batches"] < n:
        assert time.monotonic() < deadline, sub.summary()
        if pub is not None:  # a live batch is lost until the subscription is through: resend it
            pub.publish(events or [])
        sub.wait(0.05)


def test_a_late_subscriber_without_replay_says_unknown_not_uncached():
    port = free_port()
    pub = WirePublisher(port, int_hashes=True)
    hashes = _hashes(pub)
    pub.publish(_store(pub, hashes, 0, 2))  # blocks 0-1 stored before anyone listens (seq 0)
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}")).start()
    try:
        _wait_batches(sub, 1, pub, _store(pub, hashes, 2, 3))  # block 2 stored while it listens
        status = check_prompt(sub, TOKENS, 4, "sha256", None)
        assert status.cached == (False, False, True)
        assert status.complete is False  # it joined at batch >= 1 and has no replay: blocks 0-1 are unknown
        assert status.unknown == 2 and status.cached_run == 0
    finally:
        sub.stop()
        pub.close()


def test_a_replay_from_batch_0_makes_the_view_whole():
    port = free_port(2)
    pub = WirePublisher(port, port + 1, int_hashes=True)
    hashes = _hashes(pub)
    pub.publish(_store(pub, hashes, 0, 2), send=False)  # only in the replay buffer
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}", f"tcp://127.0.0.1:{port + 1}")).start()
    try:
        _wait_batches(sub, 2, pub, _store(pub, hashes, 2, 3))
        status = check_prompt(sub, TOKENS, 4, "sha256", None)
        assert status.complete is True and status.unknown == 0
        assert status.cached == (True, True, True) and status.cached_run == 3
    finally:
        sub.stop()
        pub.close()


def test_a_cleared_cache_makes_a_late_view_whole():
    port = free_port()
    pub = WirePublisher(port, int_hashes=True)
    hashes = _hashes(pub)
    pub.publish(_store(pub, hashes, 0, 2))
    sub = Subscriber(LiveConfig(f"tcp://127.0.0.1:{port}")).start()
    try:
        _wait_batches(sub, 1, pub, [pub.cleared()])  # the engine reset its prefix cache: nothing is held
        _wait_batches(sub, 2, pub, _store(pub, hashes, 0, 1))
        status = check_prompt(sub, TOKENS, 4, "sha256", None)
        assert status.complete is True and status.cached[0] is True and status.cached[1:] == (False, False)
    finally:
        sub.stop()
        pub.close()
